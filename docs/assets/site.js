// Accessibility fixes over Material's markup, re-applied on every page Material shows.
document$.subscribe(() => {
  // A region that scrolls must be reachable by keyboard (axe: scrollable-region-focusable).
  const regions = ".md-typeset__scrollwrap, .tabbed-labels, .jp-Notebook pre, .jp-Notebook .highlight, .jp-InputArea-editor"
  for (const region of document.querySelectorAll(regions)) {
    if (region.scrollWidth > region.clientWidth || region.scrollHeight > region.clientHeight) region.tabIndex = 0
  }
  // The search overlay is a dialog and needs a name (axe: aria-dialog-name).
  for (const dialog of document.querySelectorAll(".md-search[role=dialog]")) {
    dialog.setAttribute("aria-label", "Search")
  }
})
