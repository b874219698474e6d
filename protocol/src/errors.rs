//! JSON-RPC error codes. The standard ones keep their JSON-RPC 2.0 meaning; Totem's own live in
//! -32000..-32099, the range JSON-RPC reserves for servers.

/// An error code a client may see in `error.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// The line was not valid JSON (or not valid UTF-8).
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// Valid JSON, but not a JSON-RPC 2.0 request object (batches are refused with this code too).
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// No method with that name.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// Params missing, of the wrong type, or carrying unknown fields.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// A bug or an I/O failure inside the daemon; the message says what.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// `initialize` asked for a protocol version this daemon does not speak.
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(-32001);
    /// A method other than `initialize` was called first.
    pub const NOT_INITIALIZED: ErrorCode = ErrorCode(-32002);
    /// The line exceeded [`crate::MAX_LINE_BYTES`]; the connection stays open.
    pub const LINE_TOO_LONG: ErrorCode = ErrorCode(-32003);
    /// The project, session, message or run named in the params does not exist.
    pub const NOT_FOUND: ErrorCode = ErrorCode(-32004);
    /// A path given in the params is unusable (missing, not a folder, outside the project).
    pub const INVALID_PATH: ErrorCode = ErrorCode(-32005);
    /// The request conflicts with the current state (e.g. a session that is being deleted).
    pub const CONFLICT: ErrorCode = ErrorCode(-32009);
    /// The daemon is shutting down and takes no new work.
    pub const SHUTTING_DOWN: ErrorCode = ErrorCode(-32010);
    /// The daemon holds as many connections as it can (file descriptors); sent with `id: null`
    /// as the only line before it closes the connection. Try again once other clients leave.
    pub const TOO_MANY_CONNECTIONS: ErrorCode = ErrorCode(-32020);
    /// More than a few MiB of answers and events waited for this client, which was not reading
    /// its socket: sent with `id: null` (when the socket takes it) as the connection is dropped.
    /// Reconnect, and read as you go.
    pub const NOT_READING: ErrorCode = ErrorCode(-32021);
    /// The connection holds as many subscriptions as it may; unsubscribe from some first.
    pub const TOO_MANY_SUBSCRIPTIONS: ErrorCode = ErrorCode(-32022);
}

/// One entry of the error code list, for the spec and the schema.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCodeInfo {
    /// The JSON-RPC error code.
    pub code: ErrorCode,
    /// Its name in the spec (`sessionNotFound`).
    pub name: &'static str,
    /// When a client meets it.
    pub meaning: &'static str,
}

/// Every error code the daemon sends.
pub const ERROR_CODES: &[ErrorCodeInfo] = &[
    ErrorCodeInfo {
        code: ErrorCode::PARSE_ERROR,
        name: "parseError",
        meaning: "the line is not valid JSON or not UTF-8",
    },
    ErrorCodeInfo {
        code: ErrorCode::INVALID_REQUEST,
        name: "invalidRequest",
        meaning: "not a JSON-RPC 2.0 request object; batches are refused with this code",
    },
    ErrorCodeInfo {
        code: ErrorCode::METHOD_NOT_FOUND,
        name: "methodNotFound",
        meaning: "no method with that name",
    },
    ErrorCodeInfo {
        code: ErrorCode::INVALID_PARAMS,
        name: "invalidParams",
        meaning: "params missing, of the wrong type, or with unknown fields",
    },
    ErrorCodeInfo {
        code: ErrorCode::INTERNAL_ERROR,
        name: "internalError",
        meaning: "a failure inside the daemon; the message says what",
    },
    ErrorCodeInfo {
        code: ErrorCode::UNSUPPORTED_VERSION,
        name: "unsupportedVersion",
        meaning: "the requested protocol version is not spoken; data.supported lists the ones that are",
    },
    ErrorCodeInfo {
        code: ErrorCode::NOT_INITIALIZED,
        name: "notInitialized",
        meaning: "call initialize first",
    },
    ErrorCodeInfo {
        code: ErrorCode::LINE_TOO_LONG,
        name: "lineTooLong",
        meaning: "the line exceeded 16 MiB and was discarded; the connection stays open",
    },
    ErrorCodeInfo {
        code: ErrorCode::NOT_FOUND,
        name: "notFound",
        meaning: "the project, session, message or run does not exist",
    },
    ErrorCodeInfo {
        code: ErrorCode::INVALID_PATH,
        name: "invalidPath",
        meaning: "the path is missing, not a folder, or outside the project",
    },
    ErrorCodeInfo {
        code: ErrorCode::CONFLICT,
        name: "conflict",
        meaning: "the request conflicts with the current state",
    },
    ErrorCodeInfo {
        code: ErrorCode::SHUTTING_DOWN,
        name: "shuttingDown",
        meaning: "the daemon is stopping and takes no new work",
    },
    ErrorCodeInfo {
        code: ErrorCode::TOO_MANY_CONNECTIONS,
        name: "tooManyConnections",
        meaning: "the daemon holds all the connections it can, or has no file descriptor left for another; sent with id null, then the connection closes",
    },
    ErrorCodeInfo {
        code: ErrorCode::NOT_READING,
        name: "notReading",
        meaning: "more than 4 MiB of answers and events waited for this client, which did not read them; sent with id null when the socket takes it, then the connection closes",
    },
    ErrorCodeInfo {
        code: ErrorCode::TOO_MANY_SUBSCRIPTIONS,
        name: "tooManySubscriptions",
        meaning: "the connection holds 256 subscriptions, the most it may; unsubscribe from some first",
    },
];
