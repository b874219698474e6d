-- Totem's commands. The plugin itself loads on first use.

if vim.g.loaded_totem then
  return
end
vim.g.loaded_totem = true

-- Below 0.10 (Debian and Ubuntu ship 0.7) the plugin cannot work (it needs vim.uv and more):
-- every command says so, and nothing else runs.
local supported = vim.fn.has("nvim-0.10") == 1
local too_old = "Totem needs Neovim 0.10 or newer."

local function totem()
  return require("totem")
end

local function command(name, run, opts)
  if not supported then
    run = function()
      vim.notify(too_old, vim.log.levels.ERROR)
    end
    opts.complete = nil
  end
  vim.api.nvim_create_user_command(name, run, opts)
end

command("Totem", function(o)
  totem().open(o.args)
end, {
  nargs = "?",
  complete = function()
    return { "new" }
  end,
  desc = "Open the project's Totem chat (`:Totem new` starts a session)",
})
command("TotemSessions", function()
  totem().sessions()
end, { desc = "Pick a Totem session of the project" })
command("TotemAsk", function(o)
  if o.range > 0 then
    totem().ask(o.args, o.line1, o.line2)
  else
    totem().ask(o.args)
  end
end, { nargs = "*", range = true, desc = "Ask Totem about the selection (or the file)" })
command("TotemAdd", function(o)
  if o.range > 0 then
    totem().add(o.line1, o.line2)
  else
    totem().add()
  end
end, { range = true, desc = "Attach the selection (or the file) to the next Totem prompt" })
command("TotemDiff", function(o)
  totem().diff(o.args)
end, {
  nargs = "?",
  complete = function()
    return totem().run_ids()
  end,
  desc = "Show what the session (or a run) changed, in diff mode",
})
command("TotemModel", function(o)
  totem().model(o.args)
end, {
  nargs = "?",
  complete = function()
    return totem().models()
  end,
  desc = "Pick the model for the next Totem prompts",
})
command("TotemMode", function(o)
  totem().mode(o.args)
end, {
  nargs = "?",
  complete = function()
    return totem().modes
  end,
  desc = "Pick the mode (build, plan or an agent) for the next Totem prompts",
})
command("TotemRename", function(o)
  totem().rename(o.args)
end, { nargs = "+", desc = "Rename the Totem session of the chat" })
command("TotemUndo", function()
  totem().undo()
end, { desc = "Take back the newest Totem run's file changes" })
command("TotemRedo", function()
  totem().redo()
end, { desc = "Apply the last undone Totem run's changes again" })
command("TotemAbort", function()
  totem().abort()
end, { desc = "Stop the Totem run going" })
command("TotemAnswer", function()
  require("totem.question").reopen()
end, { desc = "Show the Totem question waiting for an answer" })
