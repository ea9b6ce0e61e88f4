-- wrk_production_heads.lua: every request a production-shaped head (production_heads.txt, next to
-- this file), the per-request fields unique, and the report of wrk_report.lua, whose done() it loads.
--
-- The templates are used in turn; $HOST and $PATH come from wrk's URL, the other placeholders
-- from this thread's number and its request counter, formatted exactly as
-- clients/production_heads.py formats them (a test compares the two). Each request costs wrk a
-- string.format per field and one table.concat more than a fixed request, so the scenario that
-- uses this script measures the tool's own ceiling with it.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local templates = {}  -- each a list of pieces: literal strings and placeholder names (a leading "$")
local counter = 0
local next_thread = 0

local function load_templates(path)
  local file = assert(io.open(path, "rb"))
  local lines = {}
  local current = nil
  for line in file:lines() do
    if line:sub(1, 4) == "=== " then
      current = {}
      lines[#lines + 1] = current
    elseif current ~= nil then
      current[#current + 1] = line
    elseif line ~= "" and line:sub(1, 1) ~= "#" then
      error(path .. ": text before the first template: " .. line)
    end
  end
  file:close()
  for index, head_lines in ipairs(lines) do
    while #head_lines > 0 and head_lines[#head_lines] == "" do
      head_lines[#head_lines] = nil  -- blank lines between templates
    end
    local text = table.concat(head_lines, "\r\n") .. "\r\n\r\n"
    local pieces, position = {}, 1
    while true do
      local first, last = text:find("%$[A-Z_]+", position)
      if first == nil then
        pieces[#pieces + 1] = text:sub(position)
        break
      end
      pieces[#pieces + 1] = text:sub(position, first - 1)
      pieces[#pieces + 1] = text:sub(first, last)
      position = last + 1
    end
    templates[index] = pieces
  end
end

setup = function(thread)
  thread:set("thread_number", next_thread)  -- each thread's fields differ from every other's
  next_thread = next_thread + 1
end

init = function(args)
  load_templates(here .. "production_heads.txt")
  local host = wrk.headers["Host"] or wrk.host
  for _, pieces in ipairs(templates) do
    for index, piece in ipairs(pieces) do
      if piece == "$HOST" then pieces[index] = host elseif piece == "$PATH" then pieces[index] = wrk.path end
    end
  end
end

request = function()
  local t = thread_number or 0
  local n = counter
  counter = counter + 1
  local values = {
    ["$REQUEST_ID"] = string.format("%08x-0000-4000-8000-%012x", t, n),
    ["$TRACE_ID"] = string.format("4bf92f3577b34da6%04x%012x", t, n),
    ["$SPAN_ID"] = string.format("%04x%012x", t, n),
    ["$CLIENT_IP"] = string.format("10.%d.%d.%d", (t * 64 + math.floor(n / 65536)) % 256,
                                   math.floor(n / 256) % 256, n % 256),
    ["$SESSION"] = string.format("k7%04x%012x", t, n),
  }
  local pieces = templates[n % #templates + 1]
  local out = {}
  for index, piece in ipairs(pieces) do
    out[index] = values[piece] or piece
  end
  return table.concat(out)
end

dofile(here .. "wrk_report.lua")  -- done(): the JSON report wrk.py reads
