-- The load of the PUT-path side-by-side benchmark (bench/putpath): every request is a
-- position report of a member, with that member's own token, for a random media at a random
-- position, on a keep-alive connection. The driver generates tokens.lua (the members' tokens
-- and the media ids) and passes its path as the script's argument.
--
-- Each thread formats one request per member at start, in its own random order, and sends
-- them in turn: formatting a request per call made wrk, not the server, the bottleneck (Lua
-- string building for every request), and going through the members in turn spreads the
-- load evenly over them, as players do (no member nears the rate limit).
local requests, next_request

local thread_number = 0
function setup(thread)
  thread_number = thread_number + 1
  thread:set("thread_number", thread_number)
end

function init(args)
  local data = dofile(args[1])
  local tokens, media = data.tokens, data.media
  math.randomseed(os.time() * 1000 + thread_number)
  local order = {}
  for i = 1, #tokens do order[i] = i end
  for i = #order, 2, -1 do
    local j = math.random(i)
    order[i], order[j] = order[j], order[i]
  end
  requests = {}
  for i, member in ipairs(order) do
    local body = '{"position_ms": ' .. math.random(1000, 3500000) .. '}'
    requests[i] = wrk.format("PUT", "/v1/playback/" .. media[math.random(#media)],
      { ["Authorization"] = "Bearer " .. tokens[member], ["Content-Type"] = "application/json" }, body)
  end
  next_request = 0
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

-- One line the driver parses: the counts of the whole run.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
end
