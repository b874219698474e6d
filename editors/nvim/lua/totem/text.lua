-- Untrusted text made safe to show (the Lua twin of totem_protocol::display): model, project and
-- daemon text goes through `displayable` before it reaches a float, the message line, a notice, a
-- winbar or a picker. Control characters (but newline and tab), CR, ESC, DEL, C1 controls, bidi
-- controls (U+202A–202E, U+2066–2069, U+200E/F, U+061C) and the line/paragraph separators become
-- visible escapes: `\x1b`, `\r`, `<U+202E>`. Character by character, so streamed pieces give the
-- same text as the whole; what it returns has nothing left to escape.

local M = {}

local C0 = "[%z\1-\8\11-\31\127]"

local function c0(ch)
  if ch == "\r" then
    return "\\r"
  end
  return ("\\x%02x"):format(ch:byte())
end

local function named(code)
  return function(_, last)
    return ("<U+%04X>"):format(code + last:byte())
  end
end

--- `text` with every character a terminal or an editor would obey (or reorder by) shown as a
--- visible escape; newlines and tabs stay unless `one_line`, which escapes them too.
function M.displayable(text, one_line)
  text = tostring(text or "")
  text = text:gsub(C0, c0)
  if one_line then
    text = text:gsub("\n", "\\n"):gsub("\t", "\\t")
  end
  -- C1 controls U+0080–U+009F (UTF-8 C2 80–C2 9F).
  text = text:gsub("\194([\128-\159])", function(b)
    return ("<U+%04X>"):format(b:byte())
  end)
  -- U+200E/F, U+2028/9, U+202A–E (E2 80 xx); U+2066–9 (E2 81 A6–A9); U+061C (D8 9C).
  text = text:gsub("(\226\128)([\142\143\168-\174])", named(0x2000 - 0x80))
  text = text:gsub("(\226\129)([\166-\169])", named(0x2040 - 0x80))
  text = text:gsub("\216\156", "<U+061C>")
  return text
end

--- vim.notify with the message made displayable.
function M.notify(msg, level, opts)
  return vim.notify(M.displayable(msg), level, opts)
end

return M
