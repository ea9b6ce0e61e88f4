// The timeline player: one measured run (results/timeline.json, rendered by
// scripts/harness/render/timeline_player.py into a data-timeline attribute) played back.
// Every request is a bar in its client's lane that grows as the clock runs: grey while it waits
// (listen queue, or accepted and not yet served), coloured during the 100 ms call, and a mark when
// the answer arrives. Above each chart, how many requests wait and how many are in the call at
// that instant. One clock drives both panels of a pair, on one time scale. Where the record has
// the server's own moments (its system calls, traced with strace), each bar carries a mark for
// each as the clock passes it: accepted (a line), request read (a triangle down from the top),
// answer written (a triangle up from the bottom), closed (a diamond).
// Keyboard: the buttons, the speed list and the time slider are native controls; the arrow keys
// step anywhere in the player, Home and End jump. A polite live region says the time and the
// counts after each step, pause or switch (never on every frame of playing).
(() => {
  "use strict"
  const SVG = "http://www.w3.org/2000/svg"
  const SPEEDS = [0.1, 0.25, 0.5, 1]
  const DEFAULT_SPEED = 0.25
  const LANE = 14, GAP = 4, LEFT = 30, RIGHT = 10, TOP = 4, BOTTOM = 24
  const number = value => Math.round(value).toLocaleString("en")
  const ms = value => `${number(value)} ms`

  function element(tag, attributes = {}, text = "") {
    const node = document.createElement(tag)
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value)
    if (text) node.textContent = text
    return node
  }

  function svgElement(tag, attributes) {
    const node = document.createElementNS(SVG, tag)
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value)
    return node
  }

  // One request's moments as named fields; the call is the last call_ms before the first byte.
  function requestsOf(panel) {
    const index = Object.fromEntries(panel.fields.map((name, position) => [name, position]))
    return panel.requests.map(row => {
      const get = name => row[index[name]]
      const firstByte = get("first_byte"), sent = get("sent")
      const callStart = firstByte === null ? null : Math.max(sent ?? get("start"), firstByte - panel.call_ms)
      const server = "accepted" in index
        ? {accepted: get("accepted"), headRead: get("head_read"), written: get("written"), closed: get("server_closed")}
        : null
      return {worker: get("worker"), start: get("start"), connected: get("connected") ?? get("start"),
              callStart, firstByte, end: get("end"), closed: get("closed") ?? get("end"), ok: get("ok"), server}
    })
  }

  function countsAt(requests, time) {
    let waiting = 0, calling = 0, answered = 0
    for (const request of requests) {
      if (!request.ok) continue
      if (request.end !== null && request.end <= time) answered += 1
      else if (request.callStart !== null && request.callStart <= time) calling += 1
      else if (request.start <= time) waiting += 1
    }
    return {waiting, calling, answered}
  }

  function tickStep(span, width) {
    const most = Math.max(2, Math.floor(width / 70))
    for (const step of [25, 50, 100, 200, 250, 500, 1000, 2000, 5000]) if (span / step <= most) return step
    return 10000
  }

  // The server's moments on a request's bar, each once the clock has passed it (shapes, not only colours).
  const MARKS = {
    accepted: (x, y) => `M${x - 1},${y - 2}h2v${LANE + 4}h-2z`,
    headRead: (x, y) => `M${x - 4},${y}h8l-4,6z`,
    written: (x, y) => `M${x - 4},${y + LANE}h8l-4,-6z`,
    closed: (x, y) => `M${x},${y + LANE / 2 - 4}l4,4l-4,4l-4,-4z`,
  }
  function serverMarks(svg, server, x, y, time) {
    for (const [name, path] of Object.entries(MARKS)) {
      const moment = server[name]
      if (moment === null || moment === undefined || moment > time) continue
      svg.append(svgElement("path", {class: `tp-mark tp-mark-${name}`, d: path(x(moment), y)}))
    }
  }

  function serverTraced(panels) {
    return panels.some(panel => panel.fields.includes("accepted"))
  }

  class Panel {
    constructor(data) {
      this.data = data
      this.requests = requestsOf(data)
      this.root = element("div", {class: "tp-panel", role: "group", "aria-label": `${data.design}: ${data.model}`})
      const name = element("p", {class: "tp-name"})
      name.append(element("strong", {}, data.design), ` · ${data.model}`)
      this.gauges = element("div", {class: "tp-gauges"})
      this.chart = element("div", {class: "tp-chart", role: "img",
        "aria-label": `${data.design}: ${this.requests.length} requests from ${data.clients} clients, ` +
                      `the last one closed at ${ms(data.end_ms)}`})
      this.root.append(name, this.gauges, this.chart)
      if (data.note) this.root.append(element("p", {class: "tp-note"}, data.note))
    }

    gauge(label, count, total, kind) {
      const row = element("div", {class: `tp-gauge tp-gauge-${kind}`})
      row.append(element("span", {class: "tp-gauge-label"}, `${label}: ${count}`))
      const dots = element("span", {class: "tp-dots", "aria-hidden": "true"})
      for (let i = 0; i < total; i += 1) dots.append(element("span", {class: i < count ? "tp-dot tp-on" : "tp-dot"}))
      row.append(dots)
      return row
    }

    draw(time, scaleEnd) {
      const counts = countsAt(this.requests, time)
      const {clients, call_ms: call} = this.data
      this.gauges.replaceChildren(
        this.gauge("Waiting for the server", counts.waiting, clients, "wait"),
        this.gauge(`In the ${ms(call)} call`, counts.calling, clients, "call"),
        element("div", {class: "tp-gauge"}, `Answered: ${counts.answered} of ${this.requests.length}`))
      const width = Math.max(240, this.chart.clientWidth)
      const height = TOP + clients * (LANE + GAP) + BOTTOM
      const x = value => LEFT + (width - LEFT - RIGHT) * Math.min(value, scaleEnd) / scaleEnd
      const svg = svgElement("svg", {width, height, viewBox: `0 0 ${width} ${height}`, "aria-hidden": "true"})
      const step = tickStep(scaleEnd, width - LEFT - RIGHT)
      for (let tick = 0; tick <= scaleEnd + 1e-9; tick += step) {
        svg.append(svgElement("line", {class: "tp-grid", x1: x(tick), x2: x(tick), y1: TOP, y2: height - BOTTOM}))
        const label = svgElement("text", {class: "tp-axis", x: x(tick), y: height - 8, "text-anchor": tick ? "middle" : "start"})
        label.textContent = tick >= 1000 && step >= 500 ? `${tick / 1000} s` : `${tick} ms`
        svg.append(label)
      }
      for (let lane = 0; lane < clients; lane += 1) {
        const label = svgElement("text", {class: "tp-axis", x: LEFT - 6, y: TOP + lane * (LANE + GAP) + LANE - 3, "text-anchor": "end"})
        label.textContent = String(lane + 1)
        svg.append(label)
      }
      const bar = (from, to, y, kind) => {
        if (from === null || from > time) return
        const right = x(Math.min(to ?? time, time))
        svg.append(svgElement("rect", {class: kind, x: x(from), y, height: LANE, width: Math.max(kind === "tp-answer" ? 2 : 0.5, right - x(from))}))
      }
      for (const request of this.requests) {
        const y = TOP + (request.worker ?? 0) * (LANE + GAP)
        if (!request.ok) { bar(request.start, request.end, y, "tp-failed"); continue }
        bar(request.start, request.callStart, y, "tp-wait")
        bar(request.callStart, request.firstByte, y, "tp-call")
        bar(request.firstByte, request.closed, y, "tp-answer")
        if (request.server) serverMarks(svg, request.server, x, y, time)
      }
      svg.append(svgElement("line", {class: "tp-now", x1: x(time), x2: x(time), y1: TOP - 2, y2: height - BOTTOM + 2}))
      this.chart.replaceChildren(svg)
      return counts
    }
  }

  class Player {
    constructor(root) {
      this.root = root
      this.data = JSON.parse(root.dataset.timeline)
      this.pairs = this.data.pairs ?? [{label: "", panels: this.data.panels}]
      this.speed = DEFAULT_SPEED
      this.playing = false
      this.frame = null
      this.build()
      this.choose(0, false)
    }

    build() {
      const load = this.data.load
      this.root.replaceChildren()
      if (this.data.pairs) {
        const pairs = element("div", {class: "tp-pairs", role: "group", "aria-label": "Which two designs"})
        this.pairButtons = this.pairs.map((pair, position) => {
          const button = element("button", {type: "button", class: "md-button", "aria-pressed": "false"}, pair.label)
          button.addEventListener("click", () => this.choose(position, true))
          pairs.append(button)
          return button
        })
        this.root.append(pairs)
      }
      const controls = element("div", {class: "tp-controls", role: "group", "aria-label": "Playback"})
      this.playButton = element("button", {type: "button", class: "md-button md-button--primary tp-play"}, "Play")
      this.playButton.addEventListener("click", () => (this.playing ? this.pause(true) : this.play()))
      const back = element("button", {type: "button", class: "md-button tp-back"}, "◀ Step")
      const forward = element("button", {type: "button", class: "md-button tp-forward"}, "Step ▶")
      back.addEventListener("click", () => this.step(-1))
      forward.addEventListener("click", () => this.step(1))
      const speedLabel = element("label", {class: "tp-speed"}, "Speed ")
      this.speedSelect = element("select", {"aria-label": "Playback speed"})
      for (const speed of SPEEDS) {
        const option = element("option", {value: String(speed)}, `${speed}×`)
        if (speed === DEFAULT_SPEED) option.selected = true
        this.speedSelect.append(option)
      }
      this.speedSelect.addEventListener("change", () => { this.speed = Number(this.speedSelect.value) })
      speedLabel.append(this.speedSelect)
      this.scrub = element("input", {type: "range", class: "tp-scrub", min: "0", step: "1", "aria-label": "Time in the run"})
      this.scrub.addEventListener("input", () => { this.pause(false); this.seek(Number(this.scrub.value), true) })
      this.clock = element("span", {class: "tp-clock"})
      controls.append(this.playButton, back, forward, speedLabel, this.scrub, this.clock)
      this.panels = element("div", {class: "tp-panels"})
      const legend = element("p", {class: "tp-legend"})
      legend.innerHTML = '<span class="tp-key tp-key-wait"></span> waiting for the server ' +
        '<span class="tp-key tp-key-call"></span> in the call ' +
        '<span class="tp-key tp-key-answer"></span> answer read, connection closed'
      const allPanels = this.pairs.flatMap(pair => pair.panels)
      if (serverTraced(allPanels)) {
        const keys = element("span", {class: "tp-server-keys"})
        const shape = (name, words) => {
          const key = svgElement("svg", {class: "tp-mark-key", width: 14, height: 20, viewBox: "-7 -3 14 20", "aria-hidden": "true"})
          key.append(svgElement("path", {class: `tp-mark tp-mark-${name}`, d: MARKS[name](0, 0)}))
          keys.append(key, ` ${words} `)
        }
        keys.append(" · the server's own system calls: ")
        shape("accepted", "accepted")
        shape("headRead", "read the request")
        shape("written", "wrote the answer")
        shape("closed", "closed")
        legend.append(keys)
      }
      const note = element("p", {class: "tp-note"},
        `One measured run: ${load.clients} clients, ${load.requests} requests, a ${ms(load.call_ms)} call per request, ` +
        "one lane per client, one bar per request. The times are the load client's own; the call is taken to be " +
        `the ${ms(load.call_ms)} before the answer's first byte, so "waiting" is the listen queue and any wait ` +
        `after the accept together. ` +
        (serverTraced(this.pairs.flatMap(pair => pair.panels))
          ? "Played here: a second run of the same load with the server's system calls traced (strace), its " +
            "moments the marks on each bar. A traced server is slower at every call, so the tables below quote the " +
            "untraced run; the handler started after the read and finished at the write, which no system call shows. "
          : "") +
        `Commit ${load.commit}, ${load.started_utc}. ` +
        "Keys: the arrow keys step, Home and End jump to either end of the run.")
      this.live = element("p", {class: "tp-live", "aria-live": "polite", role: "status"})
      this.root.append(controls, this.panels, legend, note, this.live)
      this.root.addEventListener("keydown", event => this.key(event))
      if (window.ResizeObserver) new ResizeObserver(() => this.draw()).observe(this.panels)
    }

    choose(position, announce) {
      this.pause(false)
      this.current = this.pairs[position].panels.map(panel => new Panel(panel))
      this.panels.replaceChildren(...this.current.map(panel => panel.root))
      this.panels.classList.toggle("tp-two", this.current.length > 1)
      this.end = Math.max(...this.current.map(panel => panel.data.end_ms))
      this.stepMs = Math.min(...this.current.map(panel => panel.data.call_ms)) / 4
      this.scrub.max = String(Math.ceil(this.end))
      for (const [index, button] of (this.pairButtons ?? []).entries()) {
        button.setAttribute("aria-pressed", String(index === position))
      }
      this.root.dataset.pair = String(position)
      this.seek(this.end, announce)  // the whole run at first: Play starts it from zero
    }

    seek(time, announce) {
      this.time = Math.max(0, Math.min(this.end, time))
      this.root.dataset.time = String(Math.round(this.time))
      this.draw()
      if (announce) this.announce()
    }

    draw() {
      if (!this.current) return
      this.counts = this.current.map(panel => panel.draw(this.time, this.end))
      this.scrub.value = String(Math.round(this.time))
      this.scrub.setAttribute("aria-valuetext", ms(this.time))
      this.clock.textContent = `${ms(this.time)} of ${ms(this.end)}`
    }

    announce() {
      const parts = this.current.map((panel, index) => {
        const counts = this.counts[index]
        return `${panel.data.design}: ${counts.waiting} waiting, ${counts.calling} in the call, ${counts.answered} answered`
      })
      this.live.textContent = `${ms(this.time)}. ${parts.join(". ")}.`
    }

    play() {
      if (this.time >= this.end) this.seek(0, false)
      this.playing = true
      this.playButton.textContent = "Pause"
      this.root.dataset.playing = "true"
      let last = performance.now()
      const tick = now => {
        this.seek(this.time + (now - last) * this.speed, false)
        last = now
        if (this.time >= this.end) { this.pause(true); return }
        this.frame = requestAnimationFrame(tick)
      }
      this.frame = requestAnimationFrame(tick)
    }

    pause(announce) {
      if (this.frame !== null) cancelAnimationFrame(this.frame)
      this.frame = null
      const was = this.playing
      this.playing = false
      if (this.playButton) this.playButton.textContent = this.time >= this.end && was ? "Replay" : "Play"
      this.root.dataset.playing = "false"
      if (announce) this.announce()
    }

    step(direction) {
      this.pause(false)
      const steps = Math.round(this.time / this.stepMs) + direction
      this.seek(steps * this.stepMs, true)
    }

    key(event) {
      const tag = event.target.tagName
      if (tag === "SELECT" || tag === "INPUT") return  // the list and the slider have their own arrow keys
      const actions = {ArrowRight: () => this.step(1), ArrowLeft: () => this.step(-1),
                       Home: () => { this.pause(false); this.seek(0, true) },
                       End: () => { this.pause(false); this.seek(this.end, true) }}
      if (!(event.key in actions)) return
      event.preventDefault()
      actions[event.key]()
    }
  }

  const start = () => {
    for (const root of document.querySelectorAll(".timeline-player[data-timeline]")) {
      if (root.dataset.ready) continue
      root.dataset.ready = "true"
      new Player(root)
    }
  }
  if (typeof document$ !== "undefined") document$.subscribe(start)  // Material's page-load stream
  else document.addEventListener("DOMContentLoaded", start)
})()
