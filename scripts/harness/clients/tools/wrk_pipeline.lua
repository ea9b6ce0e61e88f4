-- wrk_pipeline.lua: send requests in batches of `depth`, back to back, on each connection
-- (HTTP/1.1 pipelining), and report like wrk_report.lua, whose done() it loads, followed by
-- wrk's latency histogram as it stands after the run.
--
-- wrk.py passes the depth after `--`: wrk -s wrk_pipeline.lua URL -- 16.
-- wrk writes the batch at once and counts each response in it as one request;
-- it times batches (from the write to the batch's last response). At the end of the run
-- wrk "corrects" the histogram for coordinated omission with an interval computed per
-- request, which at depth N adds synthetic samples below every batch's time and leaves
-- its percentiles meaningless. wrk.py undoes that correction exactly from the histogram
-- printed here (every non-empty bucket: microseconds and count) and summarises the batches.

local depth = 1
local batch = nil

init = function(args)
  depth = tonumber(args[1]) or 1
  local requests = {}
  for index = 1, depth do
    requests[index] = wrk.format(nil)  -- GET of the URL's path, with any -H headers
  end
  batch = table.concat(requests)
end

request = function()
  return batch
end

-- done() comes from wrk_report.lua, next to this file; ours prints the histogram after it.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")
local report = done

done = function(summary, latency, requests)
  report(summary, latency, requests)
  local buckets = {}
  for index = 1, #latency do  -- wrk's stats: the index-th non-empty bucket from min to max
    local microseconds, count = latency(index)
    buckets[index] = string.format("[%d,%d]", microseconds, count)
  end
  io.write("wrk_pipeline.lua: histogram follows", "\n", "[", table.concat(buckets, ","), "]", "\n")
end
