-- `:checkhealth totem`: the socket, the daemon and its protocol version, the providers.

local M = {}

function M.check()
  local health = vim.health
  local totem = require("totem")
  local rpc = require("totem.rpc")
  health.start("Totem")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is needed (vim.uv)")
  end
  local path = rpc.socket_path(totem.config.socket)
  if vim.uv.fs_stat(path) then
    health.ok("socket: " .. path)
  else
    health.warn("no socket at " .. path, { "Start the daemon: `totem daemon start` (:Totem starts it too)" })
  end
  if vim.fn.executable(totem.config.cmd) == 1 then
    health.ok("`" .. totem.config.cmd .. "` is " .. vim.fn.exepath(totem.config.cmd))
  else
    health.warn("`" .. totem.config.cmd .. "` is not on PATH; the plugin cannot start the daemon", {
      "Install Totem, or set `cmd` in require('totem').setup{}",
    })
  end
  local conn, err = totem.connect()
  if not conn then
    health.error(err)
    return
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
  for _, method in ipairs({ "daemon.subscribe", "permission.reply", "session.diff", "session.undo" }) do
    if not totem.has(method) then
      health.warn("this totemd has no `" .. method .. "`; update it")
    end
  end
  local providers, perr = conn:call("provider.list", vim.empty_dict())
  if perr then
    health.error("provider.list: " .. perr.message)
  elseif providers then
    if providers.settingsError then
      health.error("settings.json: " .. providers.settingsError)
    end
    if #providers.providers == 0 then
      health.warn("no provider configured; a local Ollama on 127.0.0.1:11434 is used if it answers", {
        "Add one: `totem provider add`",
      })
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
