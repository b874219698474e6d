-- `:checkhealth totem`: the socket, the daemon and its protocol version, the providers.

local M = {}

function M.check()
  if vim.fn.has("nvim-0.10") == 0 then
    -- 0.7 has only require("health") and its report_* functions; 0.8 and 0.9 have both names.
    local health = vim.health or require("health")
    local v = vim.version()
    ;(health.start or health.report_start)("Totem")
    ;(health.error or health.report_error)(
      ("Totem needs Neovim 0.10 or newer; this is %d.%d.%d."):format(v.major, v.minor, v.patch)
    )
    return
  end
  local health = vim.health
  local totem = require("totem")
  local rpc = require("totem.rpc")
  health.start("Totem")
  health.ok("Neovim " .. tostring(vim.version()))
  local path = rpc.socket_path(totem.config.socket)
  local was_running = vim.uv.fs_stat(path) ~= nil
  if vim.fn.executable(totem.config.cmd) == 1 then
    health.ok("`" .. totem.config.cmd .. "` is " .. vim.fn.exepath(totem.config.cmd))
  else
    health.warn("`" .. totem.config.cmd .. "` is not on PATH; the plugin cannot start the daemon", {
      "Install Totem, or set `cmd` in require('totem').setup{}",
    })
  end
  -- One verdict on the daemon: connect first (which starts it, as :Totem does), then report.
  local conn, err = totem.connect()
  if not conn then
    health.error(err, { "Start the daemon: `totem daemon start`" })
    return
  end
  if was_running then
    health.ok("the daemon answers at " .. path)
  else
    health.ok("the daemon was not running; started it, and it answers at " .. path)
  end
  local init = totem.state.init
  health.ok(("protocol version %d (this plugin speaks 1; the daemon speaks %s)"):format(
    init.protocolVersion,
    table.concat(vim.tbl_map(tostring, init.supportedVersions or {}), ", ")
  ))
  local status = conn:call("daemon.status", vim.empty_dict())
  if status then
    health.ok(("totemd %s, pid %d, %d sessions, %d runs going"):format(
      status.version, status.pid, status.counts.sessions, status.counts.runningRuns
    ))
  end
  local needed = {
    ["daemon.subscribe"] = "following the project's sessions",
    ["permission.reply"] = "answering questions",
    ["session.diff"] = "showing changes",
    ["session.undo"] = "undo and redo",
  }
  for method, what in pairs(needed) do
    if not totem.has(method) then
      health.warn("this totemd cannot do " .. what .. "; update Totem")
    end
  end
  local providers, perr = conn:call("provider.list", vim.empty_dict())
  if perr then
    health.error("cannot list the providers: " .. perr.message)
  elseif providers then
    if providers.settingsError then
      health.error("settings.json: " .. providers.settingsError)
    end
    if #providers.providers == 0 then
      -- Totem falls back to a local Ollama: say whether it answers now.
      local tested = conn:call("provider.test", { name = "ollama" })
      if tested and tested.reachable and tested.models > 0 then
        health.ok(("no provider configured; the local Ollama Totem falls back to answers at %s with %d models"):format(
          tested.url, tested.models
        ))
      elseif tested and tested.reachable then
        health.warn(("no provider configured; the local Ollama at %s answers but has no model"):format(tested.url), {
          "Pull one: `ollama pull qwen2.5-coder:1.5b`, or add a provider: `totem provider add`",
        })
      else
        health.warn(("no provider configured, and no Ollama answers at %s now"):format(
          tested and tested.url or "its usual address"
        ), { "Start Ollama, or add a provider: `totem provider add`" })
      end
    end
    for _, p in ipairs(providers.providers) do
      health.ok(("provider %s (%s) at %s%s"):format(p.name, p.kind, p.url, p.defaultModel and (", model " .. p.defaultModel) or ""))
    end
    if providers.defaultModel then
      health.info("default model: " .. providers.defaultModel)
    end
  end
end

return M
