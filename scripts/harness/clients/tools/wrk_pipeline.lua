-- wrk_pipeline.lua: send requests in batches of `depth`, back to back, on each connection
-- (HTTP/1.1 pipelining), and report like wrk_report.lua, whose report_json() it loads.
--
-- wrk.py passes the depth and the connections after `--`: wrk -s wrk_pipeline.lua URL -- 16 50.
-- wrk writes the batch at once and counts each response in it as one request;
-- latency is measured per batch (from its write to its last response), so at
-- depth N it is the time for N answers, not for one.
--
-- Why done() recomputes the statistics: before calling done(), wrk corrects its latency
-- histogram for coordinated omission (stats_correct in wrk's stats.c) with an interval of
-- run time / (responses per connection). A pipelined connection records one latency per batch
-- of N responses, so that interval is N times too short: the correction fills the histogram
-- with values below its own minimum, and wrk's percentiles (which start at the minimum)
-- came out 0. Here the correction is undone with wrk's interval and applied again with the
-- interval between batches, which is exactly what wrk does for depth 1, and the statistics are
-- computed over the whole histogram.

-- Globals, not locals: wrk runs init() and request() in each thread's Lua state, but done() in its
-- main state, which never sees init(); done() reads them from a thread (thread:get).
pipeline_depth = 1
pipeline_connections = 1
local batch = nil
local threads = {}

setup = function(thread)  -- main state, once per thread
  threads[#threads + 1] = thread
end

init = function(args)  -- args[0] is the URL, then what follows `--`
  pipeline_depth = tonumber(args[1]) or 1
  pipeline_connections = tonumber(args[2]) or 1
  local requests = {}
  for index = 1, pipeline_depth do
    requests[index] = wrk.format(nil)  -- GET of the URL's path, with any -H headers
  end
  batch = table.concat(requests)
end

request = function()
  return batch
end

-- wrk's interval for stats_correct: run time over the latencies recorded per connection (integers, as in C).
local function interval(duration, recorded, connections)
  local per_connection = math.floor(recorded / connections)
  if per_connection < 1 then
    return nil  -- wrk corrects nothing then
  end
  return math.floor(duration / per_connection)
end

-- stats_correct: every value n >= 2e adds its count at n - e, n - 2e, ... while above e.
local function correct(counts, top, expected)
  for n = expected * 2, top do
    local count = counts[n]
    local m = n - expected
    while count > 0 and m > expected do
      counts[m] = counts[m] + count
      m = m - expected
    end
  end
end

-- The inverse: a value m > e gained the original counts of m + e, m + 2e, ...; undo it from the top down.
local function uncorrect(counts, top, expected)
  local gained = {}  -- gained[m]: the original counts at m + e, m + 2e, ... up to the top
  for m = top, expected + 1, -1 do
    local above = m + expected
    gained[m] = above <= top and (counts[above] + gained[above]) or 0
    counts[m] = counts[m] - gained[m]
  end
end

-- wrk's nearest rank (stats_percentile), over every value of the histogram.
local function percentile(counts, top, total, p)
  local rank = math.floor(p / 100 * total + 0.5 + 0.5)
  local seen = 0
  for value = 0, top do
    seen = seen + counts[value]
    if seen >= rank then
      return value
    end
  end
  return top
end

-- done() from wrk_report.lua, next to this file, is replaced below; report_json() is kept.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")

done = function(summary, latency, requests)  -- requests: per-thread rates, not used
  local top = latency.max
  local counts = {}
  for value = 0, top do
    counts[value] = latency[value + 1]  -- latency[i] is the count of value i - 1 microseconds
  end
  local depth, connections = threads[1]:get("pipeline_depth"), threads[1]:get("pipeline_connections")
  local as_wrk = interval(summary.duration, summary.requests, connections)
  local as_batches = interval(summary.duration, math.floor(summary.requests / depth), connections)
  if as_wrk and as_wrk >= 1 then
    uncorrect(counts, top, as_wrk)
  end
  if as_batches and as_batches >= 1 then
    correct(counts, top, as_batches)
  end
  local total, sum = 0, 0
  for value = 0, top do
    total = total + counts[value]
    sum = sum + counts[value] * value
  end
  if total == 0 then  -- nothing recorded: wrk.py keeps no latency for the run
    report_json(summary, {mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0})
    return
  end
  report_json(summary, {mean = sum / total, min = latency.min, max = top,
                        p50 = percentile(counts, top, total, 50), p90 = percentile(counts, top, total, 90),
                        p99 = percentile(counts, top, total, 99)})
end
