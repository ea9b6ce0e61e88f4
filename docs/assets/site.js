// Accessibility fixes over Material's markup, re-applied on every page Material shows.
document$.subscribe(() => {
  // A region that scrolls must be reachable by keyboard (axe: scrollable-region-focusable).
  const regions = ".md-typeset__scrollwrap, .tabbed-labels, .jp-Notebook pre, .jp-Notebook .highlight, .jp-InputArea-editor"
  for (const region of document.querySelectorAll(regions)) {
    if (region.scrollWidth > region.clientWidth || region.scrollHeight > region.clientHeight) region.tabIndex = 0
  }
  // A table wider than its column scrolls inside itself: say so above it ("scroll →"), and fade its
  // right edge until it is scrolled to the end (site.css: .scroll-hint, .scrolls-right). Measured
  // again when a collapsed block opens or the window changes width: a hidden table has no width.
  markScrollingTables()
  // The search overlay is a dialog and needs a name (axe: aria-dialog-name).
  for (const dialog of document.querySelectorAll(".md-search[role=dialog]")) {
    dialog.setAttribute("aria-label", "Search")
  }
})

function markScrollingTables() {
  for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap")) {
    const scrolls = wrap.scrollWidth > wrap.clientWidth + 1
    const before = wrap.previousElementSibling
    const hint = before && before.classList.contains("scroll-hint") ? before : null
    if (scrolls && !hint) {
      const text = document.createElement("p")
      text.className = "scroll-hint"
      text.textContent = "Wider than the page: scroll →"
      wrap.before(text)
    } else if (!scrolls && hint) {
      hint.remove()
    }
    if (scrolls) wrap.tabIndex = 0  // reachable by keyboard (axe: scrollable-region-focusable)
    const fade = () => wrap.classList.toggle("scrolls-right", wrap.scrollLeft + wrap.clientWidth < wrap.scrollWidth - 1)
    fade()
    if (!wrap.dataset.scrollHint) {
      wrap.dataset.scrollHint = "on"
      wrap.addEventListener("scroll", fade, {passive: true})
    }
  }
}
window.addEventListener("resize", () => markScrollingTables())
document.addEventListener("toggle", () => markScrollingTables(), true)  // a <details> opened or closed
