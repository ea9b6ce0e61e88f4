-- wrk_report.lua: print wrk's results as one JSON line for scripts/harness/clients/tools/wrk.py.
--
-- wrk calls done() once, after the run, with the summary table, the latency
-- statistics and the per-thread request-rate statistics. We print a marker line,
-- then one line of JSON, so the harness never has to read wrk's human output.
-- All times are in microseconds, as wrk keeps them; wrk.py converts to ms.

local MARKER = "wrk_report.lua: json follows"

local function number(value)
  if value ~= value then
    return "null"  -- NaN is not JSON; wrk.py then records the run's error instead of a number
  end
  -- Counts and microseconds are whole numbers; only the mean has a fraction.
  if value == math.floor(value) then
    return string.format("%d", value)
  end
  return string.format("%.3f", value)
end

done = function(summary, latency, requests)  -- requests: per-thread rates, not used
  local errors = summary.errors
  local fields = {
    '"requests": ' .. number(summary.requests),
    '"duration_us": ' .. number(summary.duration),
    '"bytes": ' .. number(summary.bytes),
    '"errors": {'
      .. '"connect": ' .. number(errors.connect)
      .. ', "read": ' .. number(errors.read)
      .. ', "write": ' .. number(errors.write)
      .. ', "status": ' .. number(errors.status)
      .. ', "timeout": ' .. number(errors.timeout) .. '}',
    '"latency_us": {'
      .. '"mean": ' .. number(latency.mean)
      .. ', "min": ' .. number(latency.min)
      .. ', "max": ' .. number(latency.max)
      .. ', "p50": ' .. number(latency:percentile(50))
      .. ', "p90": ' .. number(latency:percentile(90))
      .. ', "p99": ' .. number(latency:percentile(99)) .. '}',
  }
  io.write(MARKER, "\n", "{", table.concat(fields, ", "), "}", "\n")
end
