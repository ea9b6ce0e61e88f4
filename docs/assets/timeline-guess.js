// Predict, then see (issue 35): the question above a design's timeline player (render/timeline_player.py,
// guess_block). Without JavaScript it is a plain question with its answer folded. Here its choices become
// buttons, the player below waits (dimmed, its controls inert) until one is chosen, and the choice is checked
// against the answer the renderer read from the record (data-answer); the folded answer then opens.
(function () {
  "use strict"

  function enhance(block) {
    const answer = Number(block.dataset.answer)
    const list = block.querySelector(".tg-choices")
    const details = block.querySelector("details")
    const player = block.nextElementSibling && block.nextElementSibling.classList.contains("timeline-player")
      ? block.nextElementSibling : null
    if (!list || !details || Number.isNaN(answer) || block.dataset.ready) return
    block.dataset.ready = "true"
    const verdict = document.createElement("p")
    verdict.className = "tg-verdict"
    verdict.setAttribute("aria-live", "polite")
    if (player) {
      player.classList.add("tg-waiting")
      player.setAttribute("inert", "")
    }
    const buttons = [...list.querySelectorAll("li")].map((item, index) => {
      const button = document.createElement("button")
      button.type = "button"
      button.className = "md-button tg-choice"
      button.textContent = item.textContent
      button.addEventListener("click", () => {
        for (const other of buttons) other.disabled = true
        button.classList.add(index === answer ? "tg-right" : "tg-wrong")
        buttons[answer].classList.add("tg-right")
        verdict.textContent = index === answer ? "Right: the record agrees." : `Not this time: the record says choice ${answer + 1}.`
        details.open = true
        if (player) {
          player.classList.remove("tg-waiting")
          player.removeAttribute("inert")
        }
      })
      return button
    })
    const row = document.createElement("div")
    row.className = "tg-buttons"
    row.append(...buttons)
    list.replaceWith(row)
    row.after(verdict)
  }

  function start() {
    for (const block of document.querySelectorAll(".timeline-guess[data-answer]")) enhance(block)
  }

  if (typeof document$ !== "undefined") document$.subscribe(start)  // Material's instant navigation
  else if (document.readyState !== "loading") start()
  else document.addEventListener("DOMContentLoaded", start)
})()
