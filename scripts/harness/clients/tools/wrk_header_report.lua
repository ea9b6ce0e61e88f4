-- wrk_header_report.lua: wrk_report.lua's report, plus the numbers one response header carried.
--
-- The database designs answer X-Pool-Wait-Us: how long the request waited for a free
-- connection from the pool, in microseconds. The header is named by the WRK_HEADER
-- environment variable (wrk.py sets it from the scenario's `header_statistic`). Each wrk
-- thread keeps every value it saw (a run at pool-bound rates sees a few thousand); done()
-- copies them from the threads, sorts them, and prints a second marker and JSON line:
-- count, mean, p50, p90, p99 (nearest rank) and max, plus how many answers lacked the header.
-- Defining response() makes wrk parse every answer's headers: it costs the tool time, which is
-- why only the scenarios that need the header use this script.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
dofile(here .. "wrk_report.lua")  -- defines done(), which prints the usual report
local report_done = done
local HEADER = os.getenv("WRK_HEADER") or "X-Pool-Wait-Us"
local MARKER = "wrk_header_report.lua: json follows"

values = {}  -- per thread: every value of the header, in arrival order
missing = 0  -- per thread: answers without the header
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

response = function(status, headers, body)
  local value = headers[HEADER] or headers[string.lower(HEADER)]
  if value then
    values[#values + 1] = tonumber(value)
  else
    missing = missing + 1
  end
end

local function nearest_rank(sorted, percent)
  if #sorted == 0 then return "null" end
  return string.format("%d", sorted[math.max(1, math.ceil(#sorted * percent / 100))])
end

done = function(summary, latency, requests)
  report_done(summary, latency, requests)
  local all, absent, total = {}, 0, 0
  for _, thread in ipairs(threads) do
    for _, value in ipairs(thread:get("values") or {}) do
      all[#all + 1] = value
      total = total + value
    end
    absent = absent + (thread:get("missing") or 0)
  end
  table.sort(all)
  local mean = #all > 0 and string.format("%.1f", total / #all) or "null"
  io.write(MARKER, "\n", string.format(
    '{"header": "%s", "count": %d, "missing": %d, "mean": %s, "p50": %s, "p90": %s, "p99": %s, "max": %s}',
    HEADER, #all, absent, mean, nearest_rank(all, 50), nearest_rank(all, 90), nearest_rank(all, 99),
    nearest_rank(all, 100)), "\n")
end
