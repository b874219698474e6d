-- Totem for Neovim: the project's chat with the Totem agent, permission questions with their
-- diff, buffers that reload when a run writes, the session's changes in diff mode, undo and redo.
-- Talks to totemd over its socket (protocol version 1) and starts it when none answers.

if vim.fn.has("nvim-0.10") == 0 then
  -- Too old (Debian and Ubuntu ship 0.7): setup and the status line do nothing; anything else
  -- says what is needed.
  local function too_old()
    vim.notify("Totem needs Neovim 0.10 or newer.", vim.log.levels.ERROR)
  end
  return setmetatable({
    setup = function() end,
    statusline = function()
      return ""
    end,
  }, {
    __index = function()
      return too_old
    end,
  })
end

local rpc = require("totem.rpc")

local M = {}

M.version = "0.1.0"

local defaults = {
  -- Path of totemd's socket; nil finds it as totemd does (TOTEM_HOME, XDG_RUNTIME_DIR, ~/.totem).
  socket = nil,
  -- The `totem` command, used to start the daemon when none answers.
  cmd = "totem",
  -- Start the daemon with `totem daemon start` when none answers.
  start_daemon = true,
  -- The project folder; nil: the current working directory.
  root = nil,
  -- Where the chat opens: "right", "left", "below" or "float".
  layout = "right",
  -- Width (right/left) or height (below) of the chat, as a fraction of the editor.
  size = 0.4,
  -- Lines of the prompt window under the chat.
  prompt_height = 5,
  -- Key that sends the prompt (normal and insert mode); <CR> in normal mode sends too.
  send_key = "<C-s>",
  -- vim.notify when a run ends or a question waits.
  notify = true,
  -- Sent with every prompt when set: mode ("build", "plan", an agent) and model ("provider/model").
  mode = nil,
  model = nil,
}

M.config = vim.deepcopy(defaults)

vim.api.nvim_create_autocmd("VimLeavePre", {
  group = vim.api.nvim_create_augroup("totem_leave", {}),
  callback = function()
    M.state.leaving = true
  end,
})

-- Connection-wide state.
local state = {
  conn = nil,
  init = nil, -- the answer to `initialize`
  project = nil, -- Project {id, path, name}
  daemon_sub = nil,
  sessions = {}, -- id -> Session of this project, as last seen
  activity = {}, -- session id -> "idle" | "running" | "waiting"
  watchers = {}, -- session id -> subscription (files.changed of sessions without a chat)
  watch_seq = {}, -- session id -> the last event seen by its watcher
  rewatch = nil, -- sessions watched when the connection dropped
  leaving = false, -- Neovim is quitting: no reconnecting
  model = nil, -- the model of the last run, else the settings' default
}
M.state = state

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
end

local function notify(text, level)
  if M.config.notify then
    require("totem.text").notify(text, level or vim.log.levels.INFO, { title = "Totem" })
    if (level or vim.log.levels.INFO) >= vim.log.levels.WARN then
      state.warned = { text = text, at = vim.uv.now() }
    end
  end
end
M.notify = notify

function M.root()
  local root = M.config.root or vim.fn.getcwd()
  return vim.fn.fnamemodify(root, ":p"):gsub("/$", "")
end

--- A project-relative path for `abs`, or nil when it lies outside the project.
function M.relative(abs)
  if not state.project or abs == "" then
    return nil
  end
  local root = state.project.path
  local real = vim.uv.fs_realpath(abs) or abs
  if real:sub(1, #root + 1) == root .. "/" then
    return real:sub(#root + 2)
  end
  return nil
end

-- Reconnecting after the connection drops (the daemon restarted or stopped): attempts with a
-- growing pause, `totem daemon start` when none answers, then everything followed before is
-- followed again from the last event seen, so the chat misses nothing.
local BACKOFF_MS = { 200, 500, 1000, 2000, 4000, 8000, 8000, 8000, 8000, 8000 }
local recon = { active = false, attempt = 0, timer = nil, err = nil }

local on_close

-- What the connection needs before it is used: the protocol agreed, the project, its sessions,
-- the default model and the daemon's stream. Returns the connection, or nil and a message.
local function handshake(conn)
  local init, ierr = conn:call("initialize", {
    protocolVersion = 1,
    client = { name = "totem.nvim", version = M.version },
    capabilities = { permissions = true },
  })
  if ierr then
    conn:close()
    return nil, "totemd refused the connection: " .. ierr.message
  end
  local project, perr = conn:call("project.open", { path = M.root() })
  if perr then
    conn:close()
    return nil, "cannot open the project: " .. perr.message
  end
  state.conn = conn
  state.init = init
  state.project = project
  local page = conn:call("session.list", { projectId = project.id, limit = 500 })
  state.sessions = {}
  for _, s in ipairs(page and page.items or {}) do
    state.sessions[s.id] = s
  end
  local providers = conn:call("provider.list", vim.empty_dict())
  state.model = M.config.model or (providers and providers.defaultModel)
  if not state.model then
    -- No default named in the settings: ask which model the next run will use, without waiting.
    conn:request("model.list", vim.empty_dict(), function(_, list)
      if not state.model and list then
        state.model = list.defaultModel
        state.no_model = not list.defaultModel
        vim.cmd("redrawstatus")
      end
    end)
  end
  state.daemon_sub = conn:subscribe("daemon.subscribe", vim.empty_dict(), M._daemon_event)
  local rewatch = state.rewatch or {}
  state.rewatch = nil
  for _, id in ipairs(rewatch) do
    if state.sessions[id] then
      M._watch(id)
    end
  end
  require("totem.chat").reconnected()
  if recon.active then
    recon.active = false
    if recon.timer then
      recon.timer:stop()
      recon.timer:close()
      recon.timer = nil
    end
    notify("Reconnected to totemd")
  end
  vim.cmd("redrawstatus!")
  return conn
end

local function schedule_attempt(ms)
  if recon.timer then
    recon.timer:stop()
    recon.timer:close()
  end
  recon.timer = vim.uv.new_timer()
  recon.timer:start(ms, 0, vim.schedule_wrap(function()
    if recon.timer then
      recon.timer:close()
      recon.timer = nil
    end
    M._reconnect_attempt()
  end))
end

local function give_up()
  recon.active = false
  require("totem.text").notify(
    ("Cannot reach totemd (%s); :Totem connects again."):format(tostring(recon.err)),
    vim.log.levels.ERROR,
    { title = "Totem" }
  )
  vim.cmd("redrawstatus!")
end

local function retry_later()
  if not recon.active or state.conn then
    return
  end
  local pause = BACKOFF_MS[recon.attempt]
  if not pause then
    return give_up()
  end
  schedule_attempt(pause)
end

--- One reconnection attempt: connect; when nothing answers, start the daemon and connect again.
function M._reconnect_attempt()
  if not recon.active or state.conn then
    return
  end
  recon.attempt = recon.attempt + 1
  local path = rpc.socket_path(M.config.socket)
  local function connect_then(on_fail)
    rpc.connect(path, on_close, function(err, conn)
      if not recon.active or state.conn then
        if conn then
          conn:close()
        end
        return
      end
      if conn then
        local ok, herr = handshake(conn)
        if ok then
          return
        end
        recon.err = herr
        return retry_later()
      end
      recon.err = err
      on_fail()
    end)
  end
  connect_then(function()
    if not M.config.start_daemon then
      return retry_later()
    end
    local ok = pcall(vim.system, { M.config.cmd, "daemon", "start" }, { text = true }, function(out)
      vim.schedule(function()
        if out.code ~= 0 then
          recon.err = vim.trim((out.stderr or "") .. (out.stdout or ""))
          return retry_later()
        end
        connect_then(retry_later)
      end)
    end)
    if not ok then
      recon.err = ("cannot run `%s daemon start`"):format(M.config.cmd)
      retry_later()
    end
  end)
end

--- True while the plugin tries to get the connection back.
function M.reconnecting()
  return recon.active
end

on_close = function(reason, conn)
  if state.conn ~= conn then
    return -- a connection that never became ours
  end
  state.conn = nil
  state.daemon_sub = nil
  state.rewatch = vim.tbl_keys(state.watchers)
  state.watchers = {}
  state.activity = {}
  require("totem.question").clear()
  local again = reason ~= "closed" and not state.leaving
  require("totem.chat").disconnected(again)
  if again and not recon.active then
    recon.active = true
    recon.attempt = 0
    recon.err = reason
    schedule_attempt(0)
  end
  vim.cmd("redrawstatus!")
end

-- Connects to the socket, waiting up to `ms` for it.
local function try_connect(path, ms)
  local deadline = vim.uv.now() + ms
  repeat
    local done, err, conn = false, nil, nil
    rpc.connect(path, on_close, function(e, c)
      done, err, conn = true, e, c
    end)
    vim.wait(2000, function()
      return done
    end, 2)
    if conn then
      return conn
    end
    if vim.uv.now() >= deadline then
      return nil, err or "no answer"
    end
    vim.wait(50)
  until false
end

--- The connection, made (and the daemon started) when there is none. Returns nil and a message
--- saying what to do when totemd cannot be reached.
function M.connect()
  if state.conn and not state.conn.closed then
    return state.conn
  end
  local path = rpc.socket_path(M.config.socket)
  local conn, err = try_connect(path, 0)
  if not conn and M.config.start_daemon then
    local cmd = { M.config.cmd, "daemon", "start" }
    local ok, started = pcall(vim.system, cmd, { text = true })
    if not ok then
      return nil, ("cannot run `%s daemon start` (%s); install Totem or set `cmd`"):format(M.config.cmd, started)
    end
    local out = started:wait(15000)
    if out.code ~= 0 then
      return nil, ("`%s daemon start` failed: %s"):format(M.config.cmd, vim.trim((out.stderr or "") .. (out.stdout or "")))
    end
    conn, err = try_connect(path, 5000)
  end
  if not conn then
    return nil, ("cannot reach totemd at %s (%s); start it with `totem daemon start`"):format(path, tostring(err))
  end
  return handshake(conn)
end

--- A call on the connection; on failure the message is shown and nil returned.
function M.call(method, params, quiet)
  local conn, err = M.connect()
  if not conn then
    if not quiet then
      require("totem.text").notify(err, vim.log.levels.ERROR, { title = "Totem" })
    end
    return nil, { message = err }
  end
  local result, cerr = conn:call(method, params)
  if cerr and not quiet then
    require("totem.text").notify(cerr.message, vim.log.levels.ERROR, { title = "Totem" })
  end
  return result, cerr
end

function M.has(method)
  local methods = state.init and state.init.capabilities and state.init.capabilities.methods or {}
  return vim.tbl_contains(methods, method)
end

local function ours(session_id)
  return state.sessions[session_id] ~= nil
end

-- Sessions of this project that run without a chat open are followed for `files.changed`.
-- Each followed from the last event seen, so a reconnection misses none of their writes.
local function watch(session_id)
  if state.watchers[session_id] or require("totem.chat").session_id() == session_id then
    return
  end
  local session = state.sessions[session_id]
  local sub = state.conn:subscribe("session.subscribe", {
    sessionId = session_id,
    afterSeq = state.watch_seq[session_id] or (session and session.lastSeq) or 0,
  }, function(event)
    if event.seq then
      state.watch_seq[session_id] = event.seq
    end
    if event.type == "files.changed" then
      M.reload(event.paths)
    end
  end)
  state.watchers[session_id] = sub
end
M._watch = watch

local function unwatch(session_id)
  local sub = state.watchers[session_id]
  if sub and state.conn then
    state.conn:unsubscribe("session.unsubscribe", sub)
  end
  state.watchers[session_id] = nil
end

function M._daemon_event(event)
  local t = event.type
  if t == "session.created" or t == "session.updated" then
    if event.session.projectId == (state.project and state.project.id) then
      state.sessions[event.session.id] = event.session
      require("totem.chat").session_changed(event.session)
    end
  elseif t == "session.deleted" then
    state.sessions[event.sessionId] = nil
    state.activity[event.sessionId] = nil
    unwatch(event.sessionId)
  elseif t == "session.status" then
    if event.projectId == (state.project and state.project.id) then
      state.activity[event.sessionId] = event.status
      -- Every status line and chat bar shows it, not only the window drawn next.
      vim.schedule(function()
        vim.cmd.redrawstatus({ bang = true })
      end)
      if event.status == "idle" then
        vim.defer_fn(function()
          if state.activity[event.sessionId] == "idle" then
            unwatch(event.sessionId)
          end
        end, 500)
      else
        watch(event.sessionId)
      end
    end
  elseif t == "permission.asked" then
    if ours(event.question.sessionId) then
      require("totem.question").asked(event.question)
      local text = "A question waits for you: "
        .. require("totem.text").displayable(event.question.tool .. " " .. event.question.target, true)
      if vim.fn.mode():sub(1, 1) == "i" then
        -- The float ends insert mode, and leaving it clears the message line: say it after.
        vim.api.nvim_create_autocmd("InsertLeave", {
          once = true,
          callback = function()
            vim.schedule(function()
              notify(text, vim.log.levels.WARN)
            end)
          end,
        })
      else
        notify(text, vim.log.levels.WARN)
      end
    end
  elseif t == "permission.resolved" then
    require("totem.question").resolved(event.questionId)
  elseif t == "run.ended" then
    if ours(event.run.sessionId) then
      if event.run.model then
        state.model = event.run.model
      end
      local title = state.sessions[event.run.sessionId].title
      local status = event.run.status
      -- A warning of the last seconds (a file not reloaded) stays readable after the run's end.
      local warned = state.warned and vim.uv.now() - state.warned.at < 5000 and state.warned.text
      if status == "failed" then
        notify(("Run failed (%s): %s"):format(title, event.run.error or "no reason given"), vim.log.levels.ERROR)
      elseif warned then
        notify(("Run %s (%s). %s"):format(status, title, warned), vim.log.levels.WARN)
      else
        notify(("Run %s (%s)"):format(status, title))
      end
    end
  elseif t == "lagged" then
    state.daemon_sub = state.conn:subscribe("daemon.subscribe", vim.empty_dict(), M._daemon_event)
  end
  vim.cmd("redrawstatus")
end

--- Reloads the buffers of these project-relative paths that have no unsaved changes.
function M.reload(paths)
  if not state.project then
    return
  end
  local wanted = {}
  for _, p in ipairs(paths or {}) do
    wanted[state.project.path .. "/" .. p] = true
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      local name = vim.api.nvim_buf_get_name(buf)
      local real = name ~= "" and (vim.uv.fs_realpath(name) or name) or ""
      if wanted[name] or wanted[real] then
        if not vim.bo[buf].modified then
          local autoread = vim.bo[buf].autoread
          vim.bo[buf].autoread = true
          vim.cmd.checktime(buf)
          vim.bo[buf].autoread = autoread
        else
          notify(vim.fn.fnamemodify(name, ":~:.") .. " changed on disk; it has unsaved changes, so it was not reloaded", vim.log.levels.WARN)
        end
      end
    end
  end
end

--- For a status line: "" when not connected, else the model and what the project's sessions do.
function M.statusline()
  if not state.conn then
    return recon.active and "Totem: reconnecting…" or ""
  end
  local waiting, running = false, false
  for _, activity in pairs(state.activity) do
    waiting = waiting or activity == "waiting"
    running = running or activity == "running"
  end
  local model = state.model and state.model:gsub("^[^/]*/", "")
    or (state.no_model and "no model: add a provider" or "finding the model…")
  if waiting then
    return "Totem: waiting for you"
  elseif running then
    return "Totem: " .. model .. " · running"
  end
  return "Totem: " .. model
end

--- Attachments for the lines `first`..`last` of `buf` (the whole file without a range); nil and
--- a message when the buffer is not a file of the project.
function M.attachment(buf, first, last)
  buf = buf or 0
  local name = vim.api.nvim_buf_get_name(buf)
  if name == "" or vim.bo[buf].buftype ~= "" then
    return nil, "this buffer is not a file; open a file of the project"
  end
  local item = { path = M.relative(name) or name }
  if first and last then
    item.range = { startLine = first, endLine = last }
  end
  if vim.bo[buf].modified then
    local lines = vim.api.nvim_buf_get_lines(buf, first and first - 1 or 0, last or -1, false)
    item.text = table.concat(lines, "\n") .. "\n"
  end
  return item
end

-- Commands ---------------------------------------------------------------------------------

function M.open(args)
  local conn, err = M.connect()
  if not conn then
    return require("totem.text").notify(err, vim.log.levels.ERROR, { title = "Totem" })
  end
  local chat = require("totem.chat")
  if args == "new" then
    local session = M.call("session.create", { projectId = state.project.id })
    if session then
      state.sessions[session.id] = session
      chat.open(session)
    end
    return
  end
  chat.open()
end

function M.sessions()
  if not M.connect() then
    return M.open()
  end
  local page = M.call("session.list", { projectId = state.project.id, limit = 100 })
  if not page then
    return
  end
  local items = page.items
  if #items == 0 then
    return notify("No sessions in this project yet; :Totem starts one")
  end
  vim.ui.select(items, {
    prompt = "Totem sessions",
    format_item = function(s)
      local activity = state.activity[s.id] or s.status
      return ("%s  [%s, %d messages, %s]"):format(require("totem.text").displayable(s.title, true), activity, s.messageCount, os.date("%Y-%m-%d %H:%M", math.floor(s.updatedAt / 1000)))
    end,
  }, function(choice)
    if choice then
      require("totem.chat").open(choice)
    end
  end)
end

--- `:TotemAsk` (with a range: those lines) — sends the prompt with the selection attached.
function M.ask(prompt, first, last)
  local item, err = M.attachment(0, first, last)
  if not item then
    return require("totem.text").notify(err, vim.log.levels.ERROR, { title = "Totem" })
  end
  if not M.connect() then
    return M.open()
  end
  local chat = require("totem.chat")
  chat.open(nil, { stay = true })
  chat.send(prompt ~= "" and prompt or "Look at this.", { item })
end

--- `:TotemAdd` — the selection or the current file goes with the next prompt.
function M.add(first, last)
  local item, err = M.attachment(0, first, last)
  if not item then
    return require("totem.text").notify(err, vim.log.levels.ERROR, { title = "Totem" })
  end
  require("totem.chat").add(item)
end

local undone_prompt -- the prompt an undo put back, while a redo can take it out again

local function changes(method)
  local chat = require("totem.chat")
  local session = chat.session_id()
  if not session then
    return notify("No session yet; :Totem opens one", vim.log.levels.WARN)
  end
  local result, err = M.call(method, { sessionId = session }, true)
  if err and err.code == -32009 and err.data and err.data.files then
    local files = table.concat(err.data.files, ", ")
    local choice = vim.fn.confirm(("These files changed since: %s. Overwrite them?"):format(files), "&Overwrite\n&Cancel", 2)
    if choice ~= 1 then
      return
    end
    result, err = M.call(method, { sessionId = session, force = true }, true)
  end
  if err then
    return require("totem.text").notify(err.message, vim.log.levels.ERROR, { title = "Totem" })
  end
  M.reload(result.files)
  local undo = method == "session.undo"
  local what = #result.files > 0 and table.concat(result.files, ", ") or "no file"
  -- The undone run's prompt goes back in the prompt buffer, to send again or edit; a redo takes it out.
  local back = ""
  if undo and result.prompt and chat.offer_prompt(result.prompt) then
    undone_prompt, back = result.prompt, "; its prompt is back in the prompt window"
  elseif not undo and undone_prompt then
    chat.take_prompt(undone_prompt)
    undone_prompt = nil
  end
  notify(("%s the changes of %s: %s%s"):format(undo and "Undid" or "Redid", result.runId, what, back))
end

function M.undo()
  changes("session.undo")
end

function M.redo()
  changes("session.redo")
end

function M.abort()
  local session = require("totem.chat").session_id()
  if not session then
    return notify("No session yet; :Totem opens one", vim.log.levels.WARN)
  end
  local result = M.call("session.abort", { sessionId = session })
  if result and not result.runId then
    notify("No run is going in this session")
  elseif result and (result.droppedQueued or 0) > 0 then
    notify(("Stopped the run and dropped %d queued prompt(s)"):format(result.droppedQueued))
  end
end

function M.diff(run_id)
  require("totem.diff").open(run_id)
end

--- The runs of the chat's session that changed files, oldest first (`:TotemDiff` completion).
function M.run_ids()
  local session = require("totem.chat").session_id()
  if not session or not state.conn then
    return {}
  end
  local result = state.conn:call("session.diff", { sessionId = session }, 3000)
  return result and result.runIds or {}
end

local function use_model(name)
  M.config.model = name
  state.model = name
  notify("Totem uses " .. name .. " from the next prompt")
  vim.cmd("redrawstatus!")
end

--- The models the daemon's providers offer, as "provider/model".
function M.models()
  local result = M.call("model.list", vim.empty_dict())
  local names = {}
  for _, m in ipairs(result and result.models or {}) do
    names[#names + 1] = m.name
  end
  for _, e in ipairs(result and result.errors or {}) do
    notify(("%s: %s"):format(e.provider, e.message), vim.log.levels.WARN)
  end
  return names
end

--- `:TotemModel [provider/model]`: the model for the next prompts (a picker without a name).
function M.model(name)
  if name and name ~= "" then
    return use_model(name)
  end
  local names = M.models()
  if #names == 0 then
    return notify("No models: add a provider with `totem provider add`", vim.log.levels.WARN)
  end
  vim.ui.select(names, { prompt = "Totem model (now " .. (state.model or "the default") .. ")" }, function(choice)
    if choice then
      use_model(choice)
    end
  end)
end

M.modes = { "build", "plan" }

--- `:TotemMode [mode]`: "build" (the default), "plan" (reads and plans, changes nothing) or an
--- agent of settings.json, for the next prompts.
function M.mode(name)
  local function use(mode)
    M.config.mode = mode
    notify("Totem works in " .. mode .. " mode from the next prompt")
    require("totem.chat").refresh()
  end
  if name and name ~= "" then
    return use(name)
  end
  vim.ui.select(M.modes, { prompt = "Totem mode (now " .. (M.config.mode or "build") .. ")" }, function(choice)
    if choice then
      use(choice)
    end
  end)
end

--- `:TotemRename {title}`: renames the chat's session.
function M.rename(title)
  local session = require("totem.chat").session_id()
  if not session then
    return notify("No session yet; :Totem opens one", vim.log.levels.WARN)
  end
  if vim.trim(title or "") == "" then
    return notify("Give the new title: :TotemRename {title}", vim.log.levels.WARN)
  end
  local renamed = M.call("session.rename", { sessionId = session, title = vim.trim(title) })
  if renamed then
    state.sessions[renamed.id] = renamed
    require("totem.chat").session_changed(renamed)
  end
end

return M
