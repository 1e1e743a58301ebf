from configparser import ConfigParser
from pathlib import Path
import base64, hashlib, setuptools, shlex, zipfile
from setuptools.command.build_py import build_py
from setuptools.command.develop import develop

# Packaging is read from settings.ini (nbdev 2 layout); no pkg_resources, which current setuptools lacks.
config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

expected = 'version description keywords author author_email license status min_python audience language'.split()
missing = [o for o in expected if o not in cfg]
if missing: raise SystemExit(f'settings.ini lacks: {", ".join(missing)}')

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13'.split()

requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
scripts = [s.strip() for s in cfg.get('console_scripts', '').split() if s.strip()]

# lm-eval's own command line (`lm_eval --model astrai_nb`) finds the model through a start-up hook (nbs/44a_lm_eval_hook):
# a one-line .pth file at the root of site-packages, which Python's `site` runs at start-up (twice in a venv of Python
# 3.11, hence the check that the hook is not there yet); its line never fails a start.
# Every kind of install puts it there: a regular wheel (pip install .) holds it from build_py's output; an editable wheel
# (pip install -e ., PEP 660), which takes nothing from build_py's output, gets it added once setuptools has written it;
# a legacy `setup.py develop` (what pip runs for -e where setuptools < 80 is installed) writes it beside its egg-link.
PTH_NAME = 'astrai_nb-lm_eval.pth'
PTH_LINE = ("import sys; exec('try:\\n if not any(type(f).__name__ == \"RegistryHook\" for f in sys.meta_path):\\n"
            "  from astrai_nb.lm_eval_hook import at_startup; at_startup()\\nexcept Exception: pass')\n")

class build_py_pth(build_py):
    def run(self):
        super().run()
        if not getattr(self, 'editable_mode', False): Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

class develop_pth(develop):
    def run(self):
        super().run()
        if getattr(self, 'egg_link', None) and not self.uninstall: Path(self.install_dir, PTH_NAME).write_text(PTH_LINE)

def add_to_wheel(whl:Path, name:str, text:str):
    "Add a file at the root of the wheel `whl`, with its line in the wheel's RECORD (path,sha256=<urlsafe base64>,size)."
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    with zipfile.ZipFile(whl) as z: items = [(info, z.read(info)) for info in z.infolist()]
    with zipfile.ZipFile(whl, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
        for info, content in items:
            if info.filename.endswith('.dist-info/RECORD'): content += f'{name},sha256={digest},{len(data)}\n'.encode()
            z.writestr(info, content)

cmdclass = {'build_py': build_py_pth, 'develop': develop_pth}
try:
    from setuptools.command.editable_wheel import editable_wheel
    class editable_wheel_pth(editable_wheel):
        def run(self):
            before = {p: p.stat().st_mtime_ns for p in Path(self.dist_dir).glob('*.whl')}
            super().run()
            made = [p for p in Path(self.dist_dir).glob('*.whl') if before.get(p) != p.stat().st_mtime_ns]
            if not made: raise SystemExit(f'editable_wheel wrote no wheel into {self.dist_dir}: {PTH_NAME} cannot be added')
            for whl in made: add_to_wheel(whl, PTH_NAME, PTH_LINE)
    cmdclass['editable_wheel'] = editable_wheel_pth
except ImportError: pass    # setuptools < 64 makes no editable wheels: pip runs `setup.py develop` (develop_pth)

setuptools.setup(
    name=cfg['lib_name'],
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]]
                + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements},
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + min_python,
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': scripts, 'nbdev': [f'{cfg["lib_path"]}={cfg["lib_path"]}._modidx:d']},
    version=cfg['version'],
    description=cfg['description'],
    keywords=cfg['keywords'],
    author=cfg['author'],
    author_email=cfg['author_email'],
    cmdclass=cmdclass,
)
