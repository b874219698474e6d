-- The connection to totemd: NDJSON JSON-RPC 2.0 over its Unix socket (protocol/README.md).
-- One request per line, answers matched by id, `session.event` and `daemon.event`
-- notifications handed to the subscription they belong to. Reading happens in libuv callbacks;
-- everything that touches the editor is scheduled onto the main loop, in order.

local uv = vim.uv or vim.loop

local M = {}

--- The socket totemd listens on, found as the daemon finds it: an explicit TOTEM_HOME keeps it
--- beside the home, else $XDG_RUNTIME_DIR/totem, else ~/.totem/run.
function M.socket_path(configured)
  if configured and configured ~= "" then
    return vim.fn.expand(configured)
  end
  local home = vim.env.TOTEM_HOME
  if home and home ~= "" then
    return home .. "/run/totemd.sock"
  end
  local runtime = vim.env.XDG_RUNTIME_DIR
  if runtime and runtime ~= "" then
    return runtime .. "/totem/totemd.sock"
  end
  return (vim.env.HOME or "") .. "/.totem/run/totemd.sock"
end

local Conn = {}
Conn.__index = Conn

local decode_opts = { luanil = { object = true, array = true } }

--- Connects to `path`; `cb(err, conn)` runs on the main loop. `on_close(reason, conn)` runs once
--- when the connection ends (`reason` is "closed" when `conn:close()` ended it).
function M.connect(path, on_close, cb)
  local pipe = uv.new_pipe(false)
  if not pipe then
    return cb("cannot create a pipe")
  end
  pipe:connect(path, function(err)
    vim.schedule(function()
      if err then
        pipe:close()
        return cb(err)
      end
      local conn = setmetatable({
        pipe = pipe,
        next_id = 1,
        pending = {},
        handlers = {},
        early = {},
        partial = "",
        closed = false,
        on_close = on_close,
      }, Conn)
      pipe:read_start(function(rerr, data)
        if rerr or not data then
          vim.schedule(function()
            conn:_close(rerr or "totemd closed the connection")
          end)
          return
        end
        conn:_feed(data)
      end)
      cb(nil, conn)
    end)
  end)
end

-- Splits the stream into lines; each complete line is handled on the main loop, in order.
function Conn:_feed(data)
  local text = self.partial .. data
  local lines = {}
  local start = 1
  while true do
    local nl = text:find("\n", start, true)
    if not nl then
      break
    end
    lines[#lines + 1] = text:sub(start, nl - 1)
    start = nl + 1
  end
  self.partial = text:sub(start)
  if #lines > 0 then
    vim.schedule(function()
      for _, line in ipairs(lines) do
        self:_line(line)
      end
    end)
  end
end

function Conn:_line(line)
  if line == "" then
    return
  end
  local ok, msg = pcall(vim.json.decode, line, decode_opts)
  if not ok or type(msg) ~= "table" then
    return
  end
  if msg.method then
    local params = msg.params or {}
    local sub = params.subscription
    if not sub then
      return
    end
    local handler = self.handlers[sub]
    if handler then
      handler(params.result)
    else
      -- Events can come before the answer that names their subscription.
      self.early[sub] = self.early[sub] or {}
      table.insert(self.early[sub], params.result)
    end
    return
  end
  local cb = msg.id and self.pending[msg.id]
  if not cb then
    return
  end
  self.pending[msg.id] = nil
  if msg.error then
    cb(msg.error, nil)
  else
    cb(nil, msg.result)
  end
end

function Conn:_close(reason)
  if self.closed then
    return
  end
  self.closed = true
  pcall(function()
    self.pipe:read_stop()
    self.pipe:close()
  end)
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    cb({ code = -1, message = "the connection to totemd closed" }, nil)
  end
  if self.on_close then
    self.on_close(reason, self)
  end
end

function Conn:close()
  self:_close("closed")
end

--- Sends a request; `cb(err, result)` runs on the main loop (`err` is `{code, message, data}`).
function Conn:request(method, params, cb)
  cb = cb or function() end
  if self.closed then
    return cb({ code = -1, message = "not connected to totemd" }, nil)
  end
  local id = self.next_id
  self.next_id = id + 1
  self.pending[id] = cb
  local line = vim.json.encode({
    jsonrpc = "2.0",
    id = id,
    method = method,
    params = params or vim.empty_dict(),
  })
  self.pipe:write(line .. "\n")
end

--- A request answered before returning (the editor keeps processing events meanwhile).
--- Returns `result, err`.
function Conn:call(method, params, timeout_ms)
  local done, err, result = false, nil, nil
  self:request(method, params, function(e, r)
    done, err, result = true, e, r
  end)
  vim.wait(timeout_ms or 10000, function()
    return done
  end, 2)
  if not done then
    return nil, { code = -1, message = "totemd did not answer in time; check it with `totem doctor`" }
  end
  return result, err
end

--- Subscribes (`session.subscribe` or `daemon.subscribe`); `handler(event)` gets every event of
--- the subscription, the ones that came before the answer first. Returns the subscription id.
function Conn:subscribe(method, params, handler)
  local sub, err = self:call(method, params)
  if err then
    return nil, err
  end
  self.handlers[sub] = handler
  local early = self.early[sub]
  self.early[sub] = nil
  for _, event in ipairs(early or {}) do
    handler(event)
  end
  return sub
end

function Conn:unsubscribe(method, sub)
  self.handlers[sub] = nil
  self.early[sub] = nil
  self:request(method, { subscription = sub })
end

return M
