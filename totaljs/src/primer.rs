//! The Total.js 5 primer for the system prompt and the one-line reminder appended to each request.
//! Written for small local models: short imperative lines, one canonical example, no prose.
//! Facts from TOTALJS.md §1 and §6, in our own words.

const PRIMER: &str = r#"# Total.js 5
This is a Total.js 5 project (npm package total5). Write Total.js 5 code only. Total.js 4 and Express APIs do not exist here.

## Files
- Every .js file in these folders loads by itself at start, in this order: modules/, actions/, schemas/, models/, definitions/, controllers/, middleware/. Never require() them.
- index.js boots the app: require('total5'); Total.run({}); (never require('total4/debug')).
- config: one "key : value" per line, always with a space after the colon: name : App. Framework keys start with $: $api, $port, $httpmaxsize. Only config is read (no config-debug).
- public/ static files, views/ HTML templates, databases/ NoSQL data, plugins/<id>/ same layout.

## Routes (controllers/*.js)
- Declare routes inside exports.install = function() { ... }. Put named handlers below.
- A handler gets the controller as its argument $. `this` is NOT the controller: never var self = this.
- ROUTE('[+|-]METHOD /url/{id}/ [@flag] [#middleware] [<10MB] [--> Ns|action]', [handler]).
- METHOD: GET POST PUT PATCH DELETE, API (JSON envelope), SOCKET, FILE, or '#404'.
- + needs a signed-in user, - an anonymous one. Both need AUTH() in definitions/.
- {id} gives $.params.id. '?' in the url means /api/.
- Flags go in the string: @upload, @json, #middleware, <5MB. Never an array argument.
- Controller $: $.json(obj), $.success(value), $.invalid(error), $.view(name, model), $.plain(text), $.file(path), $.redirect(url); $.query, $.body, $.params, $.user, $.files, $.headers.

Example:
controllers/items.js
exports.install = function() {
	ROUTE('GET /', index);
	ROUTE('POST /api/items/ --> Items|create');
};

function index($) {
	$.plain('Hello');
}

actions/items.js
NEWACTION('Items|create', {
	input: '*name:String, price:Number',
	action: async function($, model) {
		model.id = UID();
		await NOSQL('items').insert(model).promise($);
		$.success(model.id);
	}
});

## Actions and schemas
- NEWACTION('Ns|name', { input, query, params, route: '+API ?', action($, model) }). Input fields: '*name:String, age:Number, tags:[String]' (* = required). Invalid input gets a 400 before the action runs.
- Use 'Ns|name' ids with API routes, never 'Ns/name'.
- NEWSCHEMA('Users', function(schema) { schema.action('list', { action: $ => $.success([]) }); }). No schema.define/setSave/setQuery/addWorkflow.
- Action $: $.success(value) (sends { success: true, value }), $.invalid('@(Error text)'), $.callback(raw), $.model, $.params, $.query, $.user. It has no $.json/$.view/$.file.
- Call an action from code: await ACTION('Items|create', data).promise($).
- Route to actions with --> Ns|name, not the v4 '*Schema --> action'.

## Globals
CONF (config values), FUNC (shared functions, set in definitions/), MAIN (runtime state), MODS (modules), DATA (query builder: DATA.find('tbl_x').where('id', id).promise($)), NOSQL(name), FILESTORAGE(name), PATH.root()/PATH.public(), CRON('*/5 * * * *', fn), ON('ready', fn), MIDDLEWARE('name', ($, next) => next()), AUTH(function($) { $.success(user) or $.invalid(); }), UID(), RESTBuilder for HTTP calls.
Sockets: ROUTE('SOCKET /ws/', socket); function socket($) { $.on('message', (client, msg) => client.send(msg)); }

## Never
Express (require('express'), app.get, res.json), TABLE, SCHEDULE (use CRON), MODULE() (use MODS.x), RESOURCE (use TRANSLATE), OPERATION/RUN (use ACTION), F.route, setInterval jobs, process.env in features (use CONF), require() of own files.

## Style
Tabs, semicolons, single quotes, var, lowercase file names.
"#;

const REMINDER: &str = "Total.js 5: require('total5') + Total.run(); handlers take $ (not this); ROUTE('VERB /url/ --> Ns|action') with flags in the string; NEWACTION('Ns|name') / NEWSCHEMA + schema.action; $.success/$.invalid/$.callback; no Express or v4 APIs (TABLE, schema.define, *Schema -->); tabs.";

/// The Total.js 5 primer for the system prompt of sessions in Total.js 5 projects (and empty
/// folders). At most 1,200 tokens (bytes / 4).
pub fn primer() -> &'static str {
    PRIMER
}

/// The one-line conventions reminder appended to each request in a Total.js 5 project.
pub fn reminder() -> &'static str {
    REMINDER
}

/// A rough token count: bytes / 4, rounded up. The budget the primer is held to.
pub fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primer_fits_its_token_budget() {
        let tokens = estimate_tokens(primer());
        assert!(tokens <= 1200, "primer is {tokens} tokens");
    }

    #[test]
    fn reminder_is_one_line() {
        assert!(!reminder().contains('\n'));
        assert!(estimate_tokens(reminder()) < 100);
    }
}
