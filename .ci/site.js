// The docs site's own script (.ci/offline.py copies it to _docs/site_libs/astrai_nb/ and loads it, deferred, on
// every page, after smalldocs.js has typeset the maths).
(() => {
  // A display formula wider than the column shrinks to fit it (down to 70%); past that it scrolls (styles.css).
  document.querySelectorAll('.katex-display').forEach((d) => {
    const k = d.querySelector('.katex');
    if (k && k.scrollWidth > d.clientWidth) k.style.fontSize = Math.max(0.7, d.clientWidth / k.scrollWidth) + 'em';
  });
  // Mermaid diagrams are drawn when the page has loaded; one wider than the column is fitted to it, and a click shows
  // it full size (scrolling in the column) and fits it again.
  if (!window.mermaid || !document.querySelector('pre.mermaid')) return;
  window.addEventListener('load', () => window.mermaid.run().then(() => {
    document.querySelectorAll('pre.mermaid > svg').forEach((s) => {
      const p = s.parentElement, w = s.viewBox.baseVal.width;
      if (w <= p.clientWidth) return;
      p.classList.add('mermaid-zoom');
      p.title = 'Click to see it full size, and again to fit it';
      p.addEventListener('click', () => {
        const full = p.classList.toggle('mermaid-full');
        s.style.maxWidth = full ? 'none' : w + 'px';
        s.style.width = full ? w + 'px' : '';
      });
    });
  }));
})();
