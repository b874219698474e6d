-- `:TotemDiff [runId]`: what the session (or one run) changed, file by file in Neovim's diff
-- mode — the file as it was on the left, as it is on the right — in a tab of its own.
-- `]f` and `[f` go to the next and previous file, `q` closes the tab.

local M = {}

local view = { tab = nil, files = {}, index = 1 }

local function totem()
  return require("totem")
end

--- The text before a change, from the text after it and the change's unified diff. Nil when the
--- file no longer matches the diff (changed since).
function M.reverse(after_lines, diff)
  local before = {}
  local pos = 1 -- next line of `after_lines` not yet copied
  local in_hunk = false
  for _, line in ipairs(vim.split(diff, "\n", { plain = true })) do
    local new_start, new_count = line:match("^@@ %-%d+,?%d* %+(%d+),?(%d*) @@")
    if new_start then
      new_start = tonumber(new_start)
      new_count = new_count == "" and 1 or tonumber(new_count)
      -- An empty new side names the line before the change.
      local first = new_count == 0 and new_start + 1 or new_start
      while pos < first do
        if after_lines[pos] == nil then
          return nil
        end
        before[#before + 1] = after_lines[pos]
        pos = pos + 1
      end
      in_hunk = true
    elseif in_hunk then
      local mark, text = line:sub(1, 1), line:sub(2)
      if mark == " " then
        if after_lines[pos] ~= text then
          return nil
        end
        before[#before + 1] = text
        pos = pos + 1
      elseif mark == "+" then
        if after_lines[pos] ~= text then
          return nil
        end
        pos = pos + 1
      elseif mark == "-" then
        before[#before + 1] = text
      end
    end
  end
  while after_lines[pos] ~= nil do
    before[#before + 1] = after_lines[pos]
    pos = pos + 1
  end
  return before
end

local function scratch(name, lines, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  if filetype and filetype ~= "" then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

local KEYS = { "]f", "[f", "q" }

-- The keys are mapped on the user's own file buffers too: take them off when the view moves on,
-- so `q` records macros again in those buffers.
local function unkey()
  for buf in pairs(view.keyed or {}) do
    if vim.api.nvim_buf_is_valid(buf) then
      for _, key in ipairs(KEYS) do
        pcall(vim.keymap.del, "n", key, { buffer = buf })
      end
    end
  end
  view.keyed = {}
end

local function keys(buf)
  view.keyed = view.keyed or {}
  view.keyed[buf] = true
  local map = function(key, fn, desc)
    vim.keymap.set("n", key, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map("]f", function()
    M.show(view.index + 1)
  end, "Next changed file")
  map("[f", function()
    M.show(view.index - 1)
  end, "Previous changed file")
  map("q", M.close, "Close the Totem diff")
end

--- Shows file `index` of the view.
function M.show(index)
  if not view.tab or not vim.api.nvim_tabpage_is_valid(view.tab) then
    return
  end
  local count = #view.files
  index = ((index - 1) % count) + 1
  view.index = index
  local file = view.files[index]
  vim.api.nvim_set_current_tabpage(view.tab)
  unkey()
  vim.cmd("diffoff!")
  vim.cmd("silent! only")
  local root = totem().state.project.path
  local abs = root .. "/" .. file.path
  local filetype = vim.filetype.match({ filename = abs }) or ""
  local after_lines = {}
  local right
  if file.status == "deleted" then
    right = scratch(("totem://%d/deleted/%s"):format(index, file.path), {}, filetype)
    vim.api.nvim_win_set_buf(0, right)
  else
    vim.cmd("edit " .. vim.fn.fnameescape(abs))
    right = vim.api.nvim_get_current_buf()
    after_lines = vim.api.nvim_buf_get_lines(right, 0, -1, false)
  end
  local header = ("Totem diff %d/%d: %s (%s)"):format(index, count, file.path, file.status)
  if file.binary or file.notKept or not file.diff then
    vim.wo.winbar = header .. " — no text diff (binary or too large)"
    keys(right)
    return
  end
  local before = file.status == "added" and {} or M.reverse(after_lines, file.diff)
  if not before then
    -- The file changed since the run: show the run's diff as text instead.
    local buf = scratch(("totem://%d/diff/%s"):format(index, file.path), vim.split(file.diff, "\n", { plain = true }), "diff")
    vim.api.nvim_win_set_buf(0, buf)
    vim.wo.winbar = header .. " — changed since; the run's diff"
    keys(buf)
    return
  end
  vim.cmd("diffthis")
  vim.wo.winbar = header .. " · now"
  keys(right)
  vim.cmd("leftabove vsplit")
  local left = scratch(("totem://%d/before/%s"):format(index, file.path), before, filetype)
  vim.api.nvim_win_set_buf(0, left)
  vim.cmd("diffthis")
  vim.wo.winbar = header .. " · before"
  keys(left)
  vim.cmd("wincmd l")
end

--- Opens the diff of `run_id` (default: every run of the chat's session not undone).
function M.open(run_id)
  local session = require("totem.chat").session_id()
  if not session then
    return totem().notify("No session yet; :Totem opens one", vim.log.levels.WARN)
  end
  local params = { sessionId = session }
  if run_id and run_id ~= "" then
    params.runId = run_id
  end
  local result = totem().call("session.diff", params)
  if not result then
    return
  end
  if #result.files == 0 then
    return totem().notify("No changes to show")
  end
  M.close()
  vim.cmd("tabnew")
  view.tab = vim.api.nvim_get_current_tabpage()
  view.files = result.files
  M.show(1)
end

function M.close()
  unkey()
  if view.tab and vim.api.nvim_tabpage_is_valid(view.tab) then
    local nr = vim.api.nvim_tabpage_get_number(view.tab)
    vim.cmd("diffoff!")
    if #vim.api.nvim_list_tabpages() > 1 then
      vim.cmd("tabclose " .. nr)
    end
  end
  view.tab = nil
end

--- The view's state (for tests).
function M.view()
  return view
end

return M
