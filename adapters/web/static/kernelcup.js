// kernelcup pages: deadline countdowns, the GPU switch, and following a running submission.
"use strict";

function countdown() {
  const clocks = document.querySelectorAll("time.countdown[datetime]");
  if (!clocks.length) return;
  const pad = (n) => String(n).padStart(2, "0");
  const tick = () => {
    const now = Date.now();
    for (const el of clocks) {
      let s = Math.floor((Date.parse(el.getAttribute("datetime")) - now) / 1000);
      if (s <= 0) { el.textContent = "now (closed)"; continue; }
      const d = Math.floor(s / 86400); s -= d * 86400;
      const h = Math.floor(s / 3600); s -= h * 3600;
      const m = Math.floor(s / 60); s -= m * 60;
      el.textContent = "in " + (d ? d + "d " : "") + pad(h) + ":" + pad(m) + ":" + pad(s);
    }
  };
  tick();
  setInterval(tick, 1000);
}

function gpuTabs() {
  const tabs = document.querySelectorAll(".tabs a[data-gpu]");
  for (const tab of tabs) {
    tab.addEventListener("click", (e) => {
      e.preventDefault();
      const gpu = tab.dataset.gpu;
      for (const t of tabs) t.classList.toggle("active", t === tab);
      for (const panel of document.querySelectorAll(".gpu-panel")) panel.hidden = panel.dataset.gpu !== gpu;
      const url = new URL(location.href);
      url.searchParams.set("gpu", gpu);
      history.replaceState(null, "", url);
    });
  }
}

function describe(job) {
  if (job.finished) return (job.state || job.phase).replace("_", " ");
  if (job.phase === "queued" && job.queue_position != null) return "queued, position " + job.queue_position;
  return job.total ? job.phase + " " + job.done + "/" + job.total : job.phase;
}

function showJob(job) {
  const card = document.querySelector('.job[data-job="' + job.job_id + '"]');
  if (!card) return;
  const status = card.querySelector(".status");
  if (status) status.textContent = describe(job);
  const bar = card.querySelector("progress");
  if (bar) {
    if (job.total) { bar.max = job.total; bar.value = job.done; } else { bar.removeAttribute("value"); }
  }
}

function follow() {
  const root = document.getElementById("submission");
  if (!root || !root.dataset.events) return;
  let polling = false;
  const poll = async () => {
    polling = true;
    try {
      const r = await fetch(root.dataset.poll, { headers: { Accept: "application/json" } });
      if (r.ok) {
        const sub = await r.json();
        sub.jobs.forEach(showJob);
        if (sub.finished) { location.reload(); return; }
      }
    } catch (e) { /* the server may be restarting: try again */ }
    setTimeout(poll, 2000);
  };
  if (!window.EventSource) { poll(); return; }
  const events = new EventSource(root.dataset.events);
  events.addEventListener("progress", (e) => showJob(JSON.parse(e.data)));
  events.addEventListener("done", () => { events.close(); location.reload(); });
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED && !polling) poll();
  };
}

document.addEventListener("DOMContentLoaded", () => { countdown(); gpuTabs(); follow(); });
