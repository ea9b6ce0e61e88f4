-- wrk_pipeline.lua: send requests in batches of `depth`, back to back, on each connection
-- (HTTP/1.1 pipelining), and report like wrk_report.lua, whose done() it loads.
--
-- wrk.py passes the depth after `--`: wrk -s wrk_pipeline.lua URL -- 16.
-- wrk writes the batch at once and counts each response in it as one request;
-- latency is measured per batch (from its write to its last response), so at
-- depth N it is the time for N answers, not for one.

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

-- done() comes from wrk_report.lua, next to this file.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")
