-- Permission questions: the oldest open one in a float with the proposed diff, answered with
-- one key. A question answered elsewhere (the REPL, another editor) or withdrawn closes its float.

local M = {}

local queue = {} -- open questions, oldest first
local float = { win = nil, buf = nil, id = nil, from = nil }

local ns = vim.api.nvim_create_namespace("totem_question")

local function totem()
  return require("totem")
end

--- Open questions, oldest first (for tests and the status line).
function M.open_questions()
  return vim.deepcopy(queue)
end

--- The id of the question the float shows, if one is shown.
function M.shown()
  return float.win and vim.api.nvim_win_is_valid(float.win) and float.id or nil
end

local function close_float()
  if float.win and vim.api.nvim_win_is_valid(float.win) then
    vim.api.nvim_win_close(float.win, true)
  end
  if float.from and vim.api.nvim_win_is_valid(float.from) then
    vim.api.nvim_set_current_win(float.from)
  end
  float.win, float.id, float.from = nil, nil, nil
end

-- Every field is made displayable: escapes, not the characters, show in the float. A target or
-- subcommand of several lines shows each further line behind a `│` gutter, so no line of it can
-- pass for one of the question's own.
local function lines_for(q)
  local show = require("totem.text").displayable
  local verb = q.kind == "execute" and "run" or q.kind
  local target = vim.split(show(q.target), "\n", { plain = true })
  local lines = { ("%s wants to %s %s"):format(show(q.tool, true), verb, target[1]) }
  for i = 2, #target do
    lines[#lines + 1] = "│ " .. target[i]
  end
  local marks = {}
  if q.explanation and q.explanation ~= "" then
    for _, line in ipairs(vim.split(show(q.explanation), "\n", { plain = true })) do
      lines[#lines + 1] = line
      marks[#lines] = "Comment"
    end
  end
  if q.subcommand and q.subcommand ~= vim.NIL and q.subcommand ~= "" and q.subcommand ~= q.target then
    local sub = vim.split(show(q.subcommand), "\n", { plain = true })
    lines[#lines + 1] = "asks for: " .. sub[1]
    for i = 2, #sub do
      lines[#lines + 1] = "│ " .. sub[i]
    end
  end
  if q.diff and q.diff ~= vim.NIL and q.diff ~= "" then
    lines[#lines + 1] = ""
    for _, line in ipairs(vim.split(show(q.diff), "\n", { plain = true, trimempty = true })) do
      lines[#lines + 1] = line
      local c = line:sub(1, 1)
      if line:sub(1, 3) == "+++" or line:sub(1, 3) == "---" then
        marks[#lines] = "Bold"
      elseif c == "+" then
        marks[#lines] = "DiffAdd"
      elseif c == "-" then
        marks[#lines] = "DiffDelete"
      elseif line:sub(1, 2) == "@@" then
        marks[#lines] = "DiffChange"
      end
    end
    if q.truncated then
      lines[#lines + 1] = "… the rest of the change is too long to show here"
      marks[#lines] = "Comment"
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "o once · s this session · p this project · d deny (with a note) · q later"
  marks[#lines] = "Question"
  return lines, marks
end

local function answer(reply)
  local id = float.id
  local q
  for _, item in ipairs(queue) do
    if item.id == id then
      q = item
    end
  end
  if not q then
    return close_float()
  end
  local _, err = totem().call("permission.reply", { sessionId = q.sessionId, questionId = q.id, reply = reply }, true)
  if err and err.code ~= -32009 then
    require("totem.text").notify("Totem: " .. err.message, vim.log.levels.ERROR)
    return
  end
  -- Answered (here or, for a conflict, elsewhere first): `permission.resolved` follows.
  M.resolved(q.id)
end

local function deny()
  local id = float.id
  vim.ui.input({ prompt = "Deny; note for the model (optional): " }, function(note)
    if float.id ~= id then
      return
    end
    local reply = { type = "deny" }
    if note and vim.trim(note) ~= "" then
      reply.note = vim.trim(note)
    end
    answer(reply)
  end)
end

local function show()
  local q = queue[1]
  if not q or M.shown() == q.id then
    return
  end
  local keep_from = float.from
  close_float()
  local lines, marks = lines_for(q)
  float.buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(float.buf, 0, -1, false, lines)
  for row, group in pairs(marks) do
    vim.api.nvim_buf_set_extmark(float.buf, ns, row - 1, 0, { line_hl_group = group })
  end
  vim.bo[float.buf].modifiable = false
  vim.bo[float.buf].bufhidden = "wipe"
  local width = 20
  for _, line in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(line))
  end
  width = math.min(width + 2, math.floor(vim.o.columns * 0.9))
  local height = math.min(#lines, math.floor(vim.o.lines * 0.7))
  float.from = keep_from or vim.api.nvim_get_current_win()
  float.win = vim.api.nvim_open_win(float.buf, true, {
    relative = "editor",
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
    border = "rounded",
    title = " Totem asks ",
    title_pos = "center",
  })
  float.id = q.id
  -- The answer keys are normal-mode maps: a question that pops up while the person types a
  -- prompt must not take their next key as text.
  vim.cmd.stopinsert()
  vim.wo[float.win].wrap = false
  local map = function(key, fn)
    vim.keymap.set("n", key, fn, { buffer = float.buf, nowait = true })
  end
  map("o", function()
    answer({ type = "once" })
  end)
  map("s", function()
    answer({ type = "alwaysSession" })
  end)
  map("p", function()
    answer({ type = "alwaysProject" })
  end)
  map("d", deny)
  map("q", close_float)
  map("<Esc>", close_float)
end

--- A question was asked (or found open when connecting).
function M.asked(question)
  for _, q in ipairs(queue) do
    if q.id == question.id then
      return
    end
  end
  queue[#queue + 1] = question
  vim.schedule(show)
end

--- A question was answered or withdrawn, here or elsewhere.
function M.resolved(id)
  for i, q in ipairs(queue) do
    if q.id == id then
      table.remove(queue, i)
      break
    end
  end
  if float.id == id then
    close_float()
    vim.schedule(show)
  end
end

--- Shows the oldest open question again (after `q`).
function M.reopen()
  if #queue == 0 then
    return totem().notify("No question waits for you")
  end
  show()
end

function M.clear()
  queue = {}
  close_float()
end

return M
