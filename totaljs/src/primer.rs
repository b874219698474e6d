//! The Total.js 5 primer for the system prompt and the one-line reminder appended to each request.
//! Written for small local models: short imperative lines, one canonical example, no prose.
//! Facts from TOTALJS.md §1 and §6, in our own words.

const PRIMER: &str = r#"# Total.js 5
This is a Total.js 5 project (npm package total5). Total.js 4 and Express APIs do not exist here.

## Files
- .js files in these folders load by themselves, in this order: modules/, actions/, schemas/, models/, definitions/, controllers/, middleware/. Never require() them.
- index.js: require('total5'); Total.run({}); Run the app with: node index.js (port 8000, or $PORT). Total.run({ watcher: false }) is release mode: one process, views cached.
- config: one "key : value" per line with a space after the colon: name : App. Framework keys start with $: $api, $port. .env (KEY=value) fills process.env. No other config files are read.
- views/*.html templates, public/ static files, databases/ data. plugins/<id>/ needs an index.js and has the same folders except modules/.

## Routes (controllers/*.js)
- Declare routes inside exports.install = function() { ... }; put named handlers below.
- A handler gets the controller as its argument $. `this` is NOT the controller.
- ROUTE('[+|-]METHOD /url/{id}/ [@upload] [#middleware] [<10MB] [--> Ns|action]', [handler]). METHOD: GET POST PUT PATCH DELETE API SOCKET FILE, or '#404'. + needs a signed-in user, - an anonymous one; both need AUTH() in definitions/. {id} gives $.params.id. Flags go in the string, never in an array. #auth runs MIDDLEWARE('auth', function($, next) { next(); }) from definitions/ (an unknown name is skipped).
- Controller $: $.view(name, model), $.json(obj), $.success(value), $.invalid(error), $.plain(text), $.redirect(url); $.query, $.body, $.params, $.user.
- $.view('index', model) renders views/index.html inside views/layout.html: that file must exist and contain @{body}, or the request hangs. In a view: @{model.name}.

## Actions (actions/*.js)
- NEWACTION('Ns|name', { input, query, params, route, action($, model) }). input: '*name:String, price:Number' (* = required). Types: String Number Boolean Date Email UID JSON Object, {a|b} (one of), [String] (array), @Name (reusable schema). Invalid input gets a 400 before the action runs.
- route: 'API ?' makes it a JSON endpoint. The client sends POST /api/ with Content-Type: application/json and {"schema": "Ns|name", "data": {...}}; the answer is {"success": true, "value": ...}. With route: 'API ?' the id uses |, never / (ids with / collide).
- Action $: $.success(value), $.invalid('error'), $.callback(raw), $.model, $.params, $.query, $.user. No $.json/$.view/$.file here.
- From code: var res = await ACTION('Ns|name', data).promise($); res is {success, value}.
- NEWSCHEMA('Users', function(schema) { schema.action('list', { action: $ => $.success([]) }); }) registers Users/list. No schema.define/setSave/setQuery.
- A reusable NEWSCHEMA('@Item', 'name:String') named by an input goes in modules/ (loads first) or above the action in the same file: actions/ files load alphabetically, and schemas/ loads after actions/.

## Data
NOSQL('items') needs no setup (files in databases/): .insert(doc), .find(), .read(), .update(doc), .remove(), with .where('id', id), .sort('name'), .take(10), .first(), and await ....promise($). DATA.find('tbl_x') needs a database driver; without one it answers 400.

## Example
views/layout.html
<!DOCTYPE html>
<html><body>@{body}</body></html>

views/index.html
<h1>@{model.title}</h1>

controllers/default.js
exports.install = function() {
	ROUTE('GET /', index);
};

function index($) {
	$.view('index', { title: 'Items' });
}

actions/items.js
NEWACTION('Items|create', {
	input: '*name:String, price:Number',
	route: 'API ?',
	action: async function($, model) {
		model.id = UID();
		await NOSQL('items').insert(model).promise($);
		$.success(model.id);
	}
});

NEWACTION('Items|list', {
	route: 'API ?',
	action: async function($) {
		var items = await NOSQL('items').find().promise($);
		$.success(items);
	}
});

client
POST /api/ {"schema": "Items|create", "data": {"name": "Pear", "price": 2}} answers {"success": true, "value": "<id>"}

## Globals
CONF (config), FUNC (shared functions, set in definitions/), MAIN (runtime state), MODS (modules), PATH.root(), FILESTORAGE(name), CRON('*/5 * * * *', fn), ON('ready', fn), AUTH(function($) { $.success(user) or $.invalid(); }), UID(), RESTBuilder.

## Never
Express (app.get, res.json), TABLE, SCHEDULE (use CRON), MODULE() (use MODS.x), OPERATION/TASK/GETSCHEMA (use ACTION), '*Schema --> action' routes, setInterval jobs.

## Style
Tabs, semicolons, single quotes, var, lowercase file names.
"#;

const REMINDER: &str = "Total.js 5 rules (npm package total5; Total.js 4 and Express APIs do not exist): the app's .js files (in controllers/, actions/ and the other Total.js folders) load by themselves, never require() them. Routes are declared with ROUTE() inside exports.install = function() {} in controllers/; a handler takes $ and answers with $.view(), $.json(), $.success() or $.invalid(). Actions are NEWACTION() in actions/. $.view() needs views/layout.html with @{body}. The app starts with node index.js. Indent with tabs.";

/// The Total.js 5 primer for the system prompt of sessions in Total.js 5 projects (and empty
/// folders). At most 1,200 tokens of cl100k_base (checked by a test, printed by bench-prompt).
/// Its example files run as they are on total5 (tests/tests/totaljs_e2e.rs).
pub fn primer() -> &'static str {
    PRIMER
}

/// The primer's essentials in one paragraph, for the system prompt of small models in a Total.js 5
/// project. Rules only: no example names a model could take for the project's own routes.
pub fn reminder() -> &'static str {
    REMINDER
}

/// The primer's example, as (path, content) pairs in the order it shows them: the files a model
/// writes (`views/layout.html`, `controllers/default.js`, `actions/items.js`...) and, under the
/// name `client`, the calls a client makes. Tests write these files as they are and run them.
pub fn primer_example() -> Vec<(&'static str, String)> {
    let Some(example) = PRIMER.split("\n## Example\n").nth(1) else {
        return Vec::new();
    };
    let example = example.split("\n## ").next().unwrap_or("");
    let is_header = |l: &str| {
        l == "client"
            || (l.contains('/') && !l.contains(' ') && !l.starts_with('<') && l.contains('.'))
    };
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut previous_blank = true;
    for line in example.lines() {
        if previous_blank && is_header(line) {
            out.push((line, String::new()));
        } else if let Some((_, content)) = out.last_mut() {
            content.push_str(line);
            content.push('\n');
        }
        previous_blank = line.trim().is_empty();
    }
    for (_, content) in &mut out {
        let trimmed = content.trim_end().len();
        content.truncate(trimmed);
        content.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reminder_is_one_line() {
        assert!(!reminder().contains('\n'));
        assert!(reminder().len() < 600);
        // No example route or action name a model could take for the project's.
        assert!(!reminder().contains("GET /"), "{}", reminder());
        assert!(!reminder().contains("Ns|"), "{}", reminder());
    }

    #[test]
    fn the_example_splits_into_its_files() {
        let files: Vec<&str> = primer_example().iter().map(|(p, _)| *p).collect();
        assert_eq!(
            files,
            vec![
                "views/layout.html",
                "views/index.html",
                "controllers/default.js",
                "actions/items.js",
                "client"
            ]
        );
        let example = primer_example();
        assert!(example[3].1.starts_with("NEWACTION('Items|create'"));
        assert!(
            example[3].1.ends_with("});\n") && example[3].1.contains("\n\nNEWACTION('Items|list'")
        );
    }
}
