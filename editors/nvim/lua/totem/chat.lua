-- The chat: a markdown buffer that shows one session's conversation as it streams, and a prompt
-- buffer under it that sends with a key. The chat buffer is only appended to: streamed text goes
-- on the last line as it comes; the finished part adds what the deltas did not bring.

local M = {}

local function totem()
  return require("totem")
end

-- Events replayed when a session is opened (its stored history, newest part).
local REPLAY_EVENTS = 4000

local chat = {
  buf = nil,
  win = nil,
  pbuf = nil,
  pwin = nil,
  session = nil, -- Session
  sub = nil, -- its subscription
  last_seq = 0,
  live_from = 0, -- events after this seq happen now; those before are replayed history
  streams = {}, -- "messageId:index" -> {type, drawn}
  open_stream = nil, -- the part whose text ends the buffer, still streaming
  started = {}, -- run id -> its start (ms)
  pending = {}, -- attachments for the next prompt
  runs = {}, -- {line, id} of each run's header in the chat buffer, in order
}
M.state = chat

function M.session_id()
  return chat.session and chat.session.id
end

local function valid(buf)
  return buf and vim.api.nvim_buf_is_valid(buf)
end

local function win_ok(win)
  return win and vim.api.nvim_win_is_valid(win)
end

-- Runs `change` on the chat buffer with it modifiable, keeping windows that showed its end
-- following it.
local function edit(change)
  local buf = chat.buf
  if not valid(buf) then
    return
  end
  local count = vim.api.nvim_buf_line_count(buf)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= count - 1 then
      following[#following + 1] = win
    end
  end
  vim.bo[buf].modifiable = true
  change(buf)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  local last = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(following) do
    vim.api.nvim_win_set_cursor(win, { last, 0 })
  end
end

local function split_lines(text)
  return vim.split(text, "\n", { plain = true })
end

-- The chat shows model and project text: made displayable (escapes for control and bidi
-- characters) like every other place that shows it, each line on one line (tabs kept).
local function shown(lines)
  local out = {}
  for i, line in ipairs(lines) do
    out[i] = (require("totem.text").displayable(line):gsub("\n", "\\n"))
  end
  return out
end

--- Appends whole lines (a streaming part ends here).
local function append(lines)
  lines = shown(lines)
  chat.open_stream = nil
  edit(function(buf)
    local count = vim.api.nvim_buf_line_count(buf)
    if count == 1 and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == "" then
      vim.api.nvim_buf_set_lines(buf, 0, 1, false, lines)
    else
      vim.api.nvim_buf_set_lines(buf, count, count, false, lines)
    end
  end)
end

--- Adds streamed text at the end: on the same line as the part's earlier text, else from a new
--- paragraph.
local function stream(key, text)
  if text == "" then
    return
  end
  edit(function(buf)
    local count = vim.api.nvim_buf_line_count(buf)
    local last = vim.api.nvim_buf_get_lines(buf, count - 1, count, false)[1] or ""
    if chat.open_stream ~= key and last ~= "" then
      vim.api.nvim_buf_set_lines(buf, count, count, false, { "", "" })
      count = count + 2
      last = ""
    end
    local pieces = split_lines(require("totem.text").displayable(text))
    vim.api.nvim_buf_set_text(buf, count - 1, #last, count - 1, #last, pieces)
  end)
  chat.open_stream = key
end

local function one_line(text, max)
  text = (text or ""):gsub("%s+", " ")
  text = vim.trim(text)
  if #text > max then
    text = text:sub(1, max - 1) .. "…"
  end
  return text
end

local TELLING = { "path", "command", "pattern", "query", "url", "content" }

local function call_detail(input)
  if type(input) ~= "table" then
    return ""
  end
  for _, key in ipairs(TELLING) do
    if type(input[key]) == "string" then
      return one_line(input[key], 80)
    end
  end
  if input.edits then
    local paths = {}
    for _, e in ipairs(input.edits) do
      paths[#paths + 1] = e.path
    end
    return table.concat(paths, ", ")
  end
  return ""
end

local function attachment_line(part)
  local lines = part.range and (" (lines %d–%d)"):format(part.range.startLine, part.range.endLine) or ""
  local unsaved = part.unsaved and ", unsaved" or ""
  return ("📎 %s%s%s"):format(part.path, lines, unsaved)
end

-- How long a run took and with which model (" in 2.1 s · qwen3:8b").
local function took(run)
  local started = chat.started[run.id] or run.startedAt
  local text = ""
  if run.endedAt and started then
    text = (" in %.1f s"):format((run.endedAt - started) / 1000)
  end
  if run.model then
    text = text .. " · " .. run.model:gsub("^[^/]*/", "")
  end
  return text
end

local function render(event)
  local t = event.type
  if t == "message.created" then
    local message = event.message
    if message.role ~= "user" then
      return
    end
    local lines = { "", "## You", "" }
    for _, part in ipairs(message.parts or {}) do
      if part.type == "text" then
        vim.list_extend(lines, split_lines(part.text))
      elseif part.type == "attachment" then
        lines[#lines + 1] = attachment_line(part)
      end
    end
    append(lines)
  elseif t == "run.queued" then
    -- Behind the run going: its prompt is drawn ("## You") when it starts.
    if chat.running then
      local text = ""
      for _, part in ipairs(event.message.parts or {}) do
        if part.type == "text" then
          text = text .. part.text
        end
      end
      append({ "", "⧗ queued: " .. one_line(text, 200) })
    end
  elseif t == "run.started" then
    local run = event.run
    chat.running = run.id
    chat.started[run.id] = run.startedAt
    local header = run.mode and run.mode ~= "build" and ("## Totem (%s)"):format(run.mode) or "## Totem"
    append({ "", header, "" })
    chat.runs[#chat.runs + 1] = { line = vim.api.nvim_buf_line_count(chat.buf) - 1, id = run.id }
  elseif t == "part.started" then
    chat.streams[event.messageId .. ":" .. event.index] = { type = event.partType, drawn = 0 }
  elseif t == "part.delta" then
    local key = event.messageId .. ":" .. event.index
    local s = chat.streams[key]
    if s and s.type == "text" then
      stream(key, event.text)
      s.drawn = s.drawn + #event.text
    end
  elseif t == "part.done" then
    local key = event.messageId .. ":" .. event.index
    local s = chat.streams[key] or { drawn = 0 }
    chat.streams[key] = nil
    local part = event.part
    if part.type == "text" then
      stream(key, part.text:sub(s.drawn + 1))
      chat.open_stream = nil
    elseif part.type == "reasoning" then
      append({ "", ("> 💭 thought (%d characters)"):format(#part.text) })
    elseif part.type == "toolCall" then
      append({ "", ("⚙ %s %s"):format(part.tool, call_detail(part.input)) })
    elseif part.type == "toolResult" then
      local output = part.output or ""
      local n = #split_lines(vim.trim(output))
      local more = n > 1 and (" (+%d more lines of output)"):format(n - 1) or ""
      local mark = part.isError and "✗" or "↳"
      append({ ("  %s %s%s"):format(mark, one_line(output, 100), more) })
    end
  elseif t == "notice" then
    local mark = ({ warning = "⚠ ", error = "✗ " })[event.level] or ""
    append({ "", "> " .. mark .. one_line(event.text, 400) })
  elseif t == "permission.asked" then
    local q = event.question
    append({ "", ("? %s wants to %s %s"):format(q.tool, q.kind, q.target) })
  elseif t == "permission.resolved" then
    local reply = event.reply and event.reply.type
    append({ reply == "deny" and "· permission denied" or reply and "· permission granted" or "· question withdrawn" })
  elseif t == "run.done" then
    chat.running = nil
    append({ "", "✓ done" .. took(event.run) })
  elseif t == "run.failed" then
    if chat.running == event.run.id then
      chat.running = nil
    end
    append({ "", "✗ run failed" .. took(event.run) .. ": " .. (event.run.error or "no reason given") })
  elseif t == "run.aborted" then
    if chat.running == event.run.id then
      chat.running = nil
    end
    append({ "", "■ run aborted" .. took(event.run) })
  elseif t == "run.interrupted" then
    if chat.running == event.run.id then
      chat.running = nil
    end
    append({ "", "■ run interrupted: totemd stopped during it" })
  elseif t == "changes.undone" or t == "changes.redone" then
    local verb = t == "changes.undone" and "↶ undid" or "↷ redid"
    append({ "", ("%s the changes of %s: %s"):format(verb, event.runId, table.concat(event.files or {}, ", ")) })
  elseif t == "files.changed" then
    -- Replayed history changed files long ago: only what happens now reloads buffers.
    if (event.seq or 0) > chat.live_from then
      totem().reload(event.paths)
    end
  elseif t == "session.deleted" then
    append({ "", "This session was deleted; :Totem new starts another." })
    chat.sub = nil
    chat.gone = true
  elseif t == "lagged" then
    chat.sub = nil
    M.follow(event.seq)
  end
end

local function on_event(event)
  if event.seq and event.seq > chat.last_seq then
    chat.last_seq = event.seq
  end
  local ok, err = pcall(render, event)
  if not ok then
    require("totem.text").notify("Totem: cannot show an event: " .. tostring(err), vim.log.levels.WARN)
  end
end

--- Follows the chat's session from `after_seq`.
function M.follow(after_seq)
  local conn = totem().connect()
  if not conn or not chat.session then
    return
  end
  local sub, err = conn:subscribe("session.subscribe", { sessionId = chat.session.id, afterSeq = after_seq }, on_event)
  if err then
    return require("totem.text").notify("Totem: " .. err.message, vim.log.levels.ERROR)
  end
  chat.sub = sub
end

local function winbar()
  if win_ok(chat.win) and chat.session then
    local title = require("totem.text").displayable(chat.session.title, true):gsub("%%", "%%%%")
    local mode = totem().config.mode
    local shown = mode and mode ~= "build" and (" [%s]"):format(mode) or ""
    vim.wo[chat.win].winbar = "%#Title#Totem%* · " .. title .. shown .. " %= %{v:lua.require'totem'.statusline()}"
  end
  if win_ok(chat.pwin) then
    local attached = {}
    for _, item in ipairs(chat.pending) do
      local lines = item.range and (" %d–%d"):format(item.range.startLine, item.range.endLine) or ""
      attached[#attached + 1] = "📎 " .. vim.fn.fnamemodify(item.path, ":t") .. lines
    end
    local key = totem().config.send_key
    local bar = ("Prompt · %s sends"):format(key)
    if #attached > 0 then
      bar = bar .. " · " .. table.concat(attached, " ")
    end
    vim.wo[chat.pwin].winbar = bar:gsub("%%", "%%%%")
  end
end

local function switch(session)
  if chat.session and chat.session.id == session.id and chat.sub then
    return
  end
  local conn = totem().connect()
  if chat.sub and conn then
    conn:unsubscribe("session.unsubscribe", chat.sub)
  end
  chat.sub = nil
  chat.gone = false
  chat.session = session
  chat.streams = {}
  chat.runs = {}
  chat.running = nil
  chat.open_stream = nil
  chat.last_seq = 0
  edit(function(buf)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  end)
  chat.live_from = session.lastSeq or 0
  local after = math.max(0, (session.lastSeq or 0) - REPLAY_EVENTS)
  chat.last_seq = after
  M.follow(after)
  winbar()
end

local function make_buffers()
  if not valid(chat.buf) then
    chat.buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(chat.buf, "totem://chat")
    vim.bo[chat.buf].filetype = "markdown"
    vim.bo[chat.buf].modifiable = false
    vim.bo[chat.buf].bufhidden = "hide"
    vim.keymap.set("n", "q", M.close, { buffer = chat.buf, desc = "Close the Totem chat" })
    for _, key in ipairs({ "i", "a", "o" }) do
      vim.keymap.set("n", key, M.focus_prompt, { buffer = chat.buf, desc = "Write a prompt" })
    end
    vim.keymap.set("n", "gd", M.diff_here, { buffer = chat.buf, desc = "Show the changes of the run under the cursor" })
  end
  if not valid(chat.pbuf) then
    chat.pbuf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(chat.pbuf, "totem://prompt")
    vim.bo[chat.pbuf].filetype = "markdown"
    vim.bo[chat.pbuf].bufhidden = "hide"
    local key = totem().config.send_key
    vim.keymap.set({ "n", "i" }, key, M.send_prompt, { buffer = chat.pbuf, desc = "Send the prompt to Totem" })
    vim.keymap.set("n", "<CR>", M.send_prompt, { buffer = chat.pbuf, desc = "Send the prompt to Totem" })
    vim.keymap.set("n", "q", M.close, { buffer = chat.pbuf, desc = "Close the Totem chat" })
  end
end

local function set_chat_options(win)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].signcolumn = "no"
  vim.wo[win].conceallevel = 2
end

local function make_windows()
  local cfg = totem().config
  if win_ok(chat.win) and win_ok(chat.pwin) then
    return
  end
  M.close()
  if cfg.layout == "float" then
    local width = math.floor(vim.o.columns * 0.8)
    local height = math.floor(vim.o.lines * 0.8) - cfg.prompt_height - 4
    local col = math.floor((vim.o.columns - width) / 2)
    chat.win = vim.api.nvim_open_win(chat.buf, false, {
      relative = "editor", width = width, height = height, row = 1, col = col,
      border = "rounded", title = " Totem ", title_pos = "center",
    })
    chat.pwin = vim.api.nvim_open_win(chat.pbuf, true, {
      relative = "editor", width = width, height = cfg.prompt_height, row = height + 3, col = col,
      border = "rounded",
    })
  else
    local placement = ({ right = "botright vsplit", left = "topleft vsplit", below = "botright split" })[cfg.layout]
      or "botright vsplit"
    vim.cmd(placement)
    chat.win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(chat.win, chat.buf)
    if cfg.layout == "below" then
      vim.api.nvim_win_set_height(chat.win, math.floor(vim.o.lines * cfg.size))
    else
      vim.api.nvim_win_set_width(chat.win, math.floor(vim.o.columns * cfg.size))
    end
    vim.cmd("belowright split")
    chat.pwin = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(chat.pwin, chat.pbuf)
    vim.api.nvim_win_set_height(chat.pwin, cfg.prompt_height)
    vim.wo[chat.pwin].winfixheight = true
  end
  -- The chat and its prompt go together: closing one (`:q`, <C-w>c) closes the other.
  local group = vim.api.nvim_create_augroup("totem_chat_windows", {})
  for _, pair in ipairs({ { chat.win, chat.pwin }, { chat.pwin, chat.win } }) do
    vim.api.nvim_create_autocmd("WinClosed", {
      group = group,
      pattern = tostring(pair[1]),
      once = true,
      callback = function()
        vim.schedule(function()
          if win_ok(pair[2]) and #vim.api.nvim_list_wins() > 1 then
            vim.api.nvim_win_close(pair[2], true)
          end
        end)
      end,
    })
  end
  set_chat_options(chat.win)
  vim.wo[chat.pwin].wrap = true
  vim.wo[chat.pwin].number = false
  vim.wo[chat.pwin].relativenumber = false
end

--- The session to open when none is named: the chat's, else the project's latest, else a new one.
local function default_session()
  if chat.session then
    return chat.session
  end
  local project = totem().state.project
  local page = totem().call("session.list", { projectId = project.id, limit = 1 })
  if page and page.items[1] then
    return page.items[1]
  end
  return totem().call("session.create", { projectId = project.id })
end

--- Opens the chat on `session` (default: as above). `opts.stay`: keep the cursor where it is.
function M.open(session, opts)
  opts = opts or {}
  local from = vim.api.nvim_get_current_win()
  session = session or default_session()
  if not session then
    return
  end
  make_buffers()
  make_windows()
  switch(session)
  winbar()
  if opts.stay and vim.api.nvim_win_is_valid(from) then
    vim.api.nvim_set_current_win(from)
  elseif win_ok(chat.pwin) then
    vim.api.nvim_set_current_win(chat.pwin)
  end
end

--- The run whose part of the chat the cursor is in.
function M.run_here()
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local found
  for _, run in ipairs(chat.runs) do
    if run.line <= row then
      found = run.id
    end
  end
  return found
end

--- `gd` in the chat: the changes of the run under the cursor, in diff mode.
function M.diff_here()
  local run = M.run_here()
  if not run then
    return totem().notify("Put the cursor on a run's answer to see its changes", vim.log.levels.WARN)
  end
  require("totem.diff").open(run)
end

function M.close()
  vim.api.nvim_create_augroup("totem_chat_windows", {})
  for _, win in ipairs({ chat.pwin, chat.win }) do
    if win_ok(win) and #vim.api.nvim_list_wins() > 1 then
      vim.api.nvim_win_close(win, true)
    end
  end
  chat.win, chat.pwin = nil, nil
end

function M.focus_prompt()
  if win_ok(chat.pwin) then
    vim.api.nvim_set_current_win(chat.pwin)
    vim.cmd("startinsert!")
  end
end

--- Sends `text` with `attachments` to the chat's session.
function M.send(text, attachments)
  local conn, err = totem().connect()
  if not conn then
    return require("totem.text").notify(err, vim.log.levels.ERROR, { title = "Totem" })
  end
  if not chat.session then
    M.open(nil, { stay = true })
  end
  local cfg = totem().config
  local params = { sessionId = chat.session.id, text = text, mode = cfg.mode, model = cfg.model }
  if attachments and #attachments > 0 then
    params.attachments = attachments
  end
  conn:request("session.prompt", params, function(perr)
    if perr then
      require("totem.text").notify("Totem did not take the prompt: " .. perr.message, vim.log.levels.ERROR, { title = "Totem" })
      if valid(chat.pbuf) and vim.api.nvim_buf_get_lines(chat.pbuf, 0, -1, false)[1] == "" then
        vim.api.nvim_buf_set_lines(chat.pbuf, 0, -1, false, split_lines(text))
      end
    end
  end)
end

--- Puts `text` in the prompt buffer when it is empty (an undone run's prompt); true if it did.
function M.offer_prompt(text)
  if not valid(chat.pbuf) or vim.trim(table.concat(vim.api.nvim_buf_get_lines(chat.pbuf, 0, -1, false), "\n")) ~= "" then
    return false
  end
  vim.api.nvim_buf_set_lines(chat.pbuf, 0, -1, false, split_lines(text))
  return true
end

--- Empties the prompt buffer if it still holds `text` as [offer_prompt] put it.
function M.take_prompt(text)
  if valid(chat.pbuf) and table.concat(vim.api.nvim_buf_get_lines(chat.pbuf, 0, -1, false), "\n") == text then
    vim.api.nvim_buf_set_lines(chat.pbuf, 0, -1, false, {})
  end
end

--- Sends what the prompt buffer holds, with the attachments added for it.
function M.send_prompt()
  if not valid(chat.pbuf) then
    return
  end
  local text = vim.trim(table.concat(vim.api.nvim_buf_get_lines(chat.pbuf, 0, -1, false), "\n"))
  if text == "" then
    return require("totem.text").notify("The prompt is empty; say what you want done", vim.log.levels.WARN, { title = "Totem" })
  end
  vim.api.nvim_buf_set_lines(chat.pbuf, 0, -1, false, {})
  local attachments = chat.pending
  chat.pending = {}
  winbar()
  M.send(text, attachments)
end

--- An attachment for the next prompt from the prompt buffer.
function M.add(item)
  chat.pending[#chat.pending + 1] = item
  if not win_ok(chat.pwin) then
    M.open(nil, { stay = true })
  end
  winbar()
  totem().notify("Attached " .. item.path .. " to the next prompt")
end

--- Draws the bars again (the mode or the attachments changed).
function M.refresh()
  winbar()
end

function M.session_changed(session)
  if chat.session and chat.session.id == session.id then
    chat.session = session
    winbar()
  end
end

--- The connection dropped; `again`: the plugin reconnects by itself.
function M.disconnected(again)
  chat.sub = nil
  if valid(chat.buf) and chat.session then
    if again then
      append({ "", "> ⚠ The connection to totemd closed; reconnecting…" })
    else
      append({ "", "> ⚠ The connection to totemd closed; :Totem connects again." })
    end
  end
end

--- The connection is back: follow the session again from the last event shown.
function M.reconnected()
  if chat.session and not chat.sub and not chat.gone then
    M.follow(chat.last_seq)
  end
end

--- The chat buffer's text (for tests and scripts).
function M.text()
  if not valid(chat.buf) then
    return ""
  end
  return table.concat(vim.api.nvim_buf_get_lines(chat.buf, 0, -1, false), "\n")
end

return M
