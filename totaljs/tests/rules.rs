//! One violating and one clean snippet per rule of the conventions check.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use totem_totaljs::{CheckConfig, Finding, ProjectContext, Severity, check, check_in_project};

fn findings(path: &str, src: &str, rule: &str) -> Vec<Finding> {
    let mut cfg = CheckConfig::default();
    cfg.enabled.insert(rule.to_string());
    check(path, src, &cfg)
        .into_iter()
        .filter(|f| f.rule == rule)
        .collect()
}

fn lines(path: &str, src: &str, rule: &str) -> Vec<usize> {
    findings(path, src, rule).iter().map(|f| f.line).collect()
}

fn clean(path: &str, src: &str, rule: &str) {
    let found = findings(path, src, rule);
    assert!(found.is_empty(), "unexpected findings: {found:#?}");
}

// #1 no-express

#[test]
fn express_require_and_habits_are_flagged() {
    let src = "var express = require('express');\nvar app = express();\napp.get('/', function(req, res) {\n\tres.json({ a: 1 });\n});\n";
    assert_eq!(
        lines("controllers/api.js", src, "no-express"),
        vec![1, 3, 4]
    );
    assert_eq!(
        lines("index.js", "import cors from 'cors';\n", "no-express"),
        vec![1]
    );
}

#[test]
fn express_words_in_strings_and_comments_are_not_flagged() {
    let src = "// we used to require('express') and app.get()\nexports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.plain(\"res.json() and require('express')\");\n}\n";
    clean("controllers/default.js", src, "no-express");
}

// #2 boot-total5

#[test]
fn v4_boot_in_index_is_flagged() {
    assert_eq!(
        lines(
            "index.js",
            "require('total4/debug')({ port: 8000 });\n",
            "boot-total5"
        ),
        vec![1]
    );
    assert_eq!(
        lines(
            "index.js",
            "require('total.js');\nF.http('debug');\n",
            "boot-total5"
        ),
        vec![1, 2]
    );
}

/// framework5 defines `F.http(opts)`, and its release.js/debug.js start with it.
#[test]
fn v5_http_starts_are_clean() {
    for boot in [
        "require('total5');\nF.http({ port: 8000 });\n",
        "require('total5');\nTotal.http({ ip: '0.0.0.0' });\n",
        "require('total5');\nconst options = {};\nF.run(options);\n",
    ] {
        clean("index.js", boot, "boot-total5");
    }
}

#[test]
fn index_without_boot_or_run_is_flagged() {
    let f = findings("index.js", "console.log('hi');\n", "boot-total5");
    assert!(f[0].message.contains("require('total5')"));
    let f = findings("index.js", "require('total5');\n", "boot-total5");
    assert!(f[0].message.contains("Total.run"));
}

#[test]
fn v5_boot_is_clean_and_only_index_is_checked() {
    clean(
        "index.js",
        "require('total5');\nTotal.run({ port: 8000 });\n",
        "boot-total5",
    );
    clean(
        "index.js",
        "require('total5');\nF.run({ release: true });\n",
        "boot-total5",
    );
    clean(
        "scripts/old.js",
        "require('total4/debug')({});\n",
        "boot-total5",
    );
}

// #3 controller-install

#[test]
fn controller_without_install_is_flagged() {
    let src = "ROUTE('GET /', index);\nfunction index($) { $.plain('x'); }\n";
    assert_eq!(
        lines("controllers/default.js", src, "controller-install"),
        vec![1]
    );
}

#[test]
fn top_level_route_next_to_install_is_flagged() {
    let src = "exports.install = function() {\n\tROUTE('GET /', index);\n};\nROUTE('GET /b/', index);\nfunction index($) { $.plain('x'); }\n";
    assert_eq!(
        lines("controllers/default.js", src, "controller-install"),
        vec![4]
    );
}

#[test]
fn routes_inside_install_are_clean() {
    let src = "exports.install = function () {\n\tROUTE('GET /', index);\n\tROUTE('GET /x/', $ => $.plain('x'));\n};\nfunction index($) { $.plain('x'); }\n";
    clean("controllers/default.js", src, "controller-install");
    clean(
        "definitions/routes.js",
        "ROUTE('GET /', $ => $.plain('x'));\n",
        "controller-install",
    );
}

// #4 handler-this

#[test]
fn v4_handlers_using_this_are_flagged() {
    let src = "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /b/', b);\n};\n\nfunction a() {\n\tvar self = this;\n\tself.json({});\n}\n\nfunction b() {\n\tthis.view('index');\n}\n";
    assert_eq!(
        lines("controllers/default.js", src, "handler-this"),
        vec![7, 12]
    );
    let save = "exports.install = function() {\n\tROUTE('POST /a/', a);\n};\nfunction a() {\n\tthis.$save();\n}\n";
    assert_eq!(
        lines("controllers/default.js", save, "handler-this"),
        vec![5]
    );
}

#[test]
fn inline_handler_using_this_is_flagged() {
    let src = "exports.install = function() {\n\tROUTE('GET /a/', function() {\n\t\tthis.plain('x');\n\t});\n};\n";
    assert_eq!(
        lines("controllers/default.js", src, "handler-this"),
        vec![3]
    );
}

#[test]
fn socket_handlers_and_dollar_handlers_may_use_this() {
    let src = "exports.install = function() {\n\tROUTE('SOCKET /ws/', socket);\n\tROUTE('+SOCKET /in/', function() {\n\t\tvar self = this;\n\t\tself.on('open', function() {});\n\t});\n\tROUTE('GET /', index);\n};\n\nfunction socket() {\n\tvar self = this;\n\tself.on('message', function(client, msg) { client.send(msg); });\n}\n\nfunction index($) {\n\t$.json({ a: 1 });\n}\n\nfunction Cache() {\n\tthis.json = {};\n}\n\nCache.prototype.read = function() {\n\treturn this.query;\n};\n";
    clean("controllers/default.js", src, "handler-this");
}

// #5 route-method

#[test]
fn unknown_or_missing_route_methods_are_flagged() {
    let src = "exports.install = function() {\n\tROUTE('FETCH /a/', a);\n\tROUTE('get /b/', a);\n\tROUTE('/c/', a);\n};\n";
    assert_eq!(
        lines("controllers/default.js", src, "route-method"),
        vec![2, 4]
    );
    let action = "NEWACTION('Items|list', { route: 'GTE /items/', action: $ => $.success() });\n";
    assert_eq!(lines("actions/items.js", action, "route-method"), vec![1]);
}

/// `Route()` upper-cases the method: `get` works (live: 200), so it is a style note only.
#[test]
fn lowercase_route_methods_are_a_note_not_an_error() {
    let src = "exports.install = function() {\n\tROUTE('get /b/', a);\n\tROUTE('+post /c/', a);\n\tROUTE('GET /d/', a);\n};\n";
    let f = findings("controllers/default.js", src, "route-method-case");
    assert_eq!(f.iter().map(|f| f.line).collect::<Vec<_>>(), vec![2, 3]);
    assert!(f.iter().all(|f| f.severity == Severity::Info));
    assert!(f[0].message.contains("'GET'"));
}

/// `F.route()` is `ROUTE()` in v5; only its v4 flags array is wrong.
#[test]
fn f_route_strings_are_checked_like_route() {
    let src = "F.route('GET /a/', a);\nTotal.route('FETCH /b/', a);\nF.route('/c/', a, ['upload'], 1024);\n";
    assert_eq!(
        lines("definitions/routes.js", src, "route-method"),
        vec![2, 3]
    );
    assert_eq!(
        lines("definitions/routes.js", src, "route-flags-array"),
        vec![3]
    );
    clean("definitions/routes.js", src, "v4-global");
}

#[test]
fn known_route_methods_are_clean() {
    let src = "exports.install = function() {\n\tROUTE('GET /', a);\n\tROUTE('+POST /b/ @upload <5MB', a);\n\tROUTE('-API ?  +login --> Users|login');\n\tROUTE('SOCKET /ws/ @text', a);\n\tROUTE('FILE /download/*.*', a);\n\tROUTE('#404', a);\n\tROUTE('DELETE /x/{id}/ --> Items|remove');\n};\n";
    clean("controllers/default.js", src, "route-method");
    clean(
        "actions/items.js",
        "NEWACTION('Items|list', { route: '+API ?', action: $ => $.success() });\n",
        "route-method",
    );
}

// #6 route-v4-schema

#[test]
fn v4_schema_route_syntax_is_flagged() {
    let src = "exports.install = function() {\n\tROUTE('GET /api/items/ *Items --> list');\n\tROUTE('API /api/ -items_query *Items --> query');\n};\n";
    let f = findings("controllers/api.js", src, "route-v4-schema");
    assert_eq!(f.iter().map(|f| f.line).collect::<Vec<_>>(), vec![2, 3]);
    assert!(f[0].message.contains("--> Items|list"));
}

#[test]
fn v5_action_routes_are_clean() {
    let src = "exports.install = function() {\n\tROUTE('GET /api/items/ --> *Items/list');\n\tROUTE('GET /api/x/ --> Items|list');\n\tROUTE('API /v1/ -api_basic --> APIRoutes/success');\n\tROUTE('API /v1/ *api_star --> APIRoutes/success');\n\tROUTE('FILE /files/*.jpg', a);\n};\n";
    clean("controllers/api.js", src, "route-v4-schema");
}

// action-function

#[test]
fn a_newaction_without_an_action_function_is_flagged() {
    let src = "NEWACTION('Contact|create', { name: 'Hammer', email: 'a@b.c' });\nNEWACTION('Contact|other', { name: 'A' }, function($) {\n\t$.success();\n});\nNEWACTION('Contact|ok', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n";
    assert_eq!(
        lines("actions/contact.js", src, "action-function"),
        vec![1, 2]
    );
    let f = findings("actions/contact.js", src, "action-function");
    assert!(
        f[0].message
            .contains("NEWACTION('Contact|create') has no action function"),
        "{}",
        f[0].message
    );
}

// action-model-param

#[test]
fn an_action_that_uses_model_without_taking_it_is_flagged() {
    let src = "NEWACTION('Contact|create', {\n\tname: 'Create',\n\taction: function($) {\n\t\t$.success(model.title);\n\t}\n});\n";
    assert_eq!(
        lines("actions/contact.js", src, "action-model-param"),
        vec![4]
    );
    let f = findings("actions/contact.js", src, "action-model-param");
    assert!(
        f[0].message.contains("action: function($, model)"),
        "{}",
        f[0].message
    );
}

#[test]
fn an_action_that_takes_model_or_declares_it_is_clean() {
    let takes = "NEWACTION('Contact|create', {\n\taction: function($, model) {\n\t\t$.success(model.title);\n\t}\n});\n";
    clean("actions/contact.js", takes, "action-model-param");
    let declares = "NEWACTION('A|b', {\n\taction: function($) {\n\t\tvar model = $.body;\n\t\t$.success({ model: 1, x: a.model });\n\t}\n});\n";
    clean("actions/a.js", declares, "action-model-param");
    let key = "NEWACTION('A|b', {\n\taction: function($) {\n\t\t$.success({ model: 1, x: a.model });\n\t}\n});\n";
    clean("actions/a.js", key, "action-model-param");
}

// route-action-handler

#[test]
fn an_action_passed_as_the_handler_is_flagged_with_the_route_to_write() {
    let src = "exports.install = function() {\n\tROUTE('GET /api/products/count/', Products|count);\n\tROUTE('POST /api/contact/', 'Contact|create');\n};\n";
    assert_eq!(
        lines("controllers/default.js", src, "route-action-handler"),
        vec![2, 3]
    );
    let f = findings("controllers/default.js", src, "route-action-handler");
    assert!(
        f[0].message
            .contains("ROUTE('GET /api/products/count/ --> Products|count');"),
        "{}",
        f[0].message
    );
}

#[test]
fn an_action_passed_as_the_handler_is_rewritten_into_the_route_string() {
    let src = "exports.install = function() {\n\tROUTE('GET /api/products/count/', Products|count);\n\tROUTE('POST /api/contact/', 'Contact|create');\n\tROUTE('GET /', index);\n};\n";
    let (fixed, calls) = totem_totaljs::fix_action_handlers(src).expect("fixed");
    assert_eq!(
        fixed,
        "exports.install = function() {\n\tROUTE('GET /api/products/count/ --> Products|count');\n\tROUTE('POST /api/contact/ --> Contact|create');\n\tROUTE('GET /', index);\n};\n"
    );
    assert_eq!(
        calls,
        [
            "ROUTE('GET /api/products/count/ --> Products|count');",
            "ROUTE('POST /api/contact/ --> Contact|create');"
        ]
    );
    clean("controllers/default.js", &fixed, "route-action-handler");
    assert_eq!(totem_totaljs::fix_action_handlers(&fixed), None);
}

#[test]
fn handlers_and_action_routes_are_clean_of_route_action_handler() {
    let src = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /api/x/ --> Items|list');\n\tROUTE('GET /y/', function($) { $.json(a | b); });\n\tROUTE('GET /z/', 'view');\n};\n";
    clean("controllers/default.js", src, "route-action-handler");
}

// #7 route-flags-array

#[test]
fn v4_flags_array_and_fourth_argument_are_flagged() {
    let src = "exports.install = function() {\n\tROUTE('POST /upload/', upload, ['upload'], 1024 * 10);\n\tROUTE('POST /x/', upload, ['json']);\n};\n";
    assert_eq!(
        lines("controllers/files.js", src, "route-flags-array"),
        vec![2, 3]
    );
}

#[test]
fn flags_in_the_url_string_and_byte_size_are_clean() {
    let src = "exports.install = function() {\n\tROUTE('POST /upload/ @upload <10MB', upload);\n\tROUTE('POST /x/', upload, 1024 * 1024);\n\tROUTE('GET /y/', function($) { $.json([1, 2]); });\n};\n";
    clean("controllers/files.js", src, "route-flags-array");
}

// #8 api-action-id

#[test]
fn slash_action_id_with_api_route_is_flagged() {
    let src = "NEWACTION('Coll/one', {\n\troute: 'API ?',\n\taction: $ => $.success(1)\n});\n";
    let f = findings("actions/coll.js", src, "api-action-id");
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("'Coll|one'"));
}

#[test]
fn pipe_ids_and_slash_ids_without_api_route_are_clean() {
    let src = "NEWACTION('Coll|one', { route: '+API ?', action: $ => $.success(1) });\nNEWACTION('Coll/two', { route: 'POST /coll/', action: $ => $.success(2) });\nNEWACTION('Coll/three', { action: $ => $.success(3) });\n";
    clean("actions/coll.js", src, "api-action-id");
}

/// openplatform, cms, todomator: `Ns/name` ids behind an API route that names its own endpoint.
#[test]
fn slash_ids_behind_an_explicit_api_endpoint_are_clean() {
    let actions = "NEWACTION('Apps/list', { route: '+API /api/ -apps_list --> Apps/list', action: $ => $.success([]) });\n";
    clean("actions/apps.js", actions, "api-action-id");
    let controller = "exports.install = function() {\n\tROUTE('+API /api/ -apps_list --> Apps/list');\n\tROUTE('+API /api/ +apps_save --> Apps/save');\n};\n";
    let f = check("controllers/api.js", controller, &CheckConfig::default());
    assert!(f.is_empty(), "{f:?}");
}

// #9 schema-v4-api

#[test]
fn v4_schema_methods_are_flagged() {
    let src = "NEWSCHEMA('Users', function(s) {\n\ts.define('name', String, true);\n\ts.setSave(function($, model) {\n\t\tmodel.$clean();\n\t});\n});\nNEWSCHEMA('Old').make(function(schema) {\n\tschema.addWorkflow('x', function() {});\n});\n";
    assert_eq!(
        lines("schemas/users.js", src, "schema-v4-api"),
        vec![2, 3, 4, 7, 8]
    );
}

#[test]
fn v5_schema_actions_are_clean() {
    let src = "NEWSCHEMA('Users', function(schema) {\n\tschema.action('list', {\n\t\tname: 'List users',\n\t\taction: $ => $.success([])\n\t});\n});\nNEWSCHEMA('@Address', 'street:String, city:String');\n";
    clean("schemas/users.js", src, "schema-v4-api");
}

// #10 action-controller-method

#[test]
fn controller_methods_inside_actions_and_auth_are_flagged() {
    let src = "NEWACTION('Items|list', {\n\taction: function($) {\n\t\t$.json([]);\n\t}\n});\nNEWSCHEMA('Pages', function(schema) {\n\tschema.action('read', {\n\t\taction($) { $.view('page'); }\n\t});\n});\nAUTH(function($) {\n\t$.plain('no');\n});\nNEWACTION('Files|get', { action: (ctx) => ctx.file('x.pdf') });\n";
    assert_eq!(
        lines("actions/items.js", src, "action-controller-method"),
        vec![3, 8, 12, 14]
    );
}

#[test]
fn options_methods_in_actions_and_json_in_handlers_are_clean() {
    let action = "NEWACTION('Items|list', {\n\taction: async function($, model) {\n\t\tvar items = await DATA.find('tbl_items').promise($);\n\t\t$.callback(items);\n\t\t$.controller.json(items);\n\t}\n});\n";
    clean("actions/items.js", action, "action-controller-method");
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n};\nfunction index($) {\n\t$.json({});\n\t$.action('Items|list', { action: 1 });\n}\n";
    clean(
        "controllers/default.js",
        controller,
        "action-controller-method",
    );
}

// #11 v4-global

#[test]
fn v4_globals_are_flagged() {
    let src = "SCHEDULE('12:00', '1 day', fn);\nvar t = TABLE('users');\nMODULE('auth').check();\nPREF.set('a', 1);\nF.route('/x/', fn);\nOPERATION('send', {});\n";
    let f = findings("definitions/init.js", src, "v4-global");
    assert_eq!(
        f.iter().map(|f| f.line).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 6]
    );
    assert!(f[0].message.contains("CRON"));
}

/// Checked absent from total5 0.0.14's globals, present in framework4's.
#[test]
fn v4_leftovers_getschema_task_convert_logger_are_flagged() {
    let src = "var s = GETSCHEMA('Users');\nNEWTASK('Sync', function(push) {});\nTASK('Sync/run', fn);\nvar m = CONVERT(obj, 'name:String');\nLOGGER('audit', 'x');\n";
    assert_eq!(
        lines("schemas/users.js", src, "v4-global"),
        vec![1, 2, 3, 4, 5]
    );
}

/// totaljs/flow: `global.PREF = MEMORIZE('preferences')` in definitions/ makes every `PREF.x`
/// the app's own, not the v4 global.
#[test]
fn globals_the_project_defines_are_its_own() {
    let use_pref = "NEWACTION('Settings|read', {\n\taction: function($) {\n\t\t$.success(PREF.name || PREF['token']);\n\t}\n});\n";
    assert_eq!(lines("actions/settings.js", use_pref, "v4-global"), vec![3]);
    let ctx = ProjectContext {
        globals: ["PREF".to_string()].into(),
        ..ProjectContext::default()
    };
    let f = check_in_project(
        "actions/settings.js",
        use_pref,
        &CheckConfig::default(),
        &ctx,
    );
    assert!(f.iter().all(|f| f.rule != "v4-global"), "{f:?}");

    // The same file defining it is enough on its own.
    clean(
        "definitions/init.js",
        "global.PREF = MEMORIZE('preferences');\nPREF.set('a', 1);\n",
        "v4-global",
    );
    clean(
        "modules/tasks.js",
        "function TASK(name) {\n\treturn name;\n}\nTASK('x');\n",
        "v4-global",
    );

    // The scan finds `global.X =`, `global['X'] =` and top-level names of definitions/ and modules/.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("definitions")).unwrap();
    std::fs::create_dir_all(dir.path().join("modules")).unwrap();
    std::fs::create_dir_all(dir.path().join("actions")).unwrap();
    std::fs::write(
        dir.path().join("definitions/init.js"),
        "global.PREF = MEMORIZE('preferences');\nglobal['STATUS'] = {};\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("modules/helpers.js"),
        "var MAKE = function(o) { return o; };\nfunction FAKE() {}\nif (a == b) { var inner = 1; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("actions/x.js"),
        "function run() {\n\tvar TABLE = 1;\n}\n",
    )
    .unwrap();
    let globals = ProjectContext::scan(dir.path()).globals;
    for name in ["PREF", "STATUS", "MAKE", "FAKE"] {
        assert!(globals.contains(name), "{name} in {globals:?}");
    }
    assert!(!globals.contains("TABLE") && !globals.contains("inner"));
}

#[test]
fn v5_globals_members_and_local_names_are_clean() {
    let src = "CRON('*/5 * * * *', fn);\nNOSQL('users').find();\nMODS.auth.check();\nvar x = obj.TABLE('a');\nfunction MAP(a) { return a; }\nMAP(1);\nvar s = 'TABLE(\"x\")';\n";
    clean("definitions/init.js", src, "v4-global");
}

// #12 no-app-require

#[test]
fn requiring_app_files_is_flagged() {
    let src = "var helper = require('../modules/helper');\nvar x = require('./x.js');\n";
    assert_eq!(
        lines("controllers/default.js", src, "no-app-require"),
        vec![1, 2]
    );
    assert_eq!(
        lines(
            "plugins/admin/index.js",
            "require('./lib');\n",
            "no-app-require"
        ),
        vec![1]
    );
}

#[test]
fn package_requires_and_other_folders_are_clean() {
    clean(
        "controllers/default.js",
        "var qb = require('querybuilderpg');\n",
        "no-app-require",
    );
    clean("scripts/seed.js", "require('./lib');\n", "no-app-require");
}

// #13 node-builtin

#[test]
fn node_builtins_and_interval_jobs_are_noted() {
    let src = "var fs = require('fs');\nvar p = require('node:path');\nsetInterval(function() {}, 60000);\n";
    assert_eq!(
        lines("definitions/jobs.js", src, "node-builtin"),
        vec![1, 2, 3]
    );
}

#[test]
fn framework_helpers_and_boot_file_are_clean() {
    clean(
        "definitions/jobs.js",
        "CRON('*/5 * * * *', fn);\nvar file = PATH.root('a.txt');\nTotal.Fs.readFile(file, fn);\n",
        "node-builtin",
    );
    clean(
        "index.js",
        "var fs = require('fs');\nrequire('total5');\nTotal.run({});\n",
        "node-builtin",
    );
}

// #14 success-envelope

#[test]
fn hand_made_success_envelope_is_flagged() {
    let src = "function save($) {\n\t$.json({ success: true, value: 1 });\n\t$.json({ 'success': false });\n}\n";
    assert_eq!(
        lines("controllers/default.js", src, "success-envelope"),
        vec![2, 3]
    );
}

/// #32 item 4: `$.json({ ok: true })` is what the user asked for in the README's own example; a
/// shape other than the framework's envelope is the code's own API.
#[test]
fn shapes_the_code_spells_out_are_not_envelopes() {
    let src = "function save($) {\n\t$.json({ ok: true });\n\t$.json({ 'ok': 1, items: [] });\n\t$.json({ success: true, items: [] });\n\t$.json({ success: ok, value: 1 });\n}\n";
    clean("controllers/default.js", src, "success-envelope");
}

#[test]
fn success_helper_and_other_json_are_clean() {
    let src = "function save($) {\n\t$.success(1);\n\t$.json({ items: [], success: true });\n}\n";
    clean("controllers/default.js", src, "success-envelope");
}

// #15 config-format

#[test]
fn config_without_space_after_colon_is_flagged() {
    let src = "name:Foo\n$port : 8000\nurl :http://x\n";
    let f = findings("config", src, "config-format");
    assert_eq!(f.iter().map(|f| f.line).collect::<Vec<_>>(), vec![1, 3]);
    assert!(f[0].message.contains("name : Foo"));
}

#[test]
fn json_and_lines_without_colon_in_config_are_flagged() {
    assert_eq!(
        lines("config", "{\n\t\"name\": \"App\"\n}\n", "config-format"),
        vec![1]
    );
    assert_eq!(
        lines(
            "config",
            "db : x\nport = 8000\ndefault_port : 8000\n",
            "config-format"
        ),
        vec![2]
    );
}

/// v4 keys are ignored by v5, but nothing breaks: a warning.
#[test]
fn v4_keys_in_config_are_a_warning() {
    let f = findings(
        "config",
        "name : App\ndefault_port : 8000\ndirectory_public : /www/\n",
        "config-v4-key",
    );
    assert_eq!(f.iter().map(|f| f.line).collect::<Vec<_>>(), vec![2, 3]);
    assert!(f.iter().all(|f| f.severity == Severity::Warning));
}

/// The parser trims keys and values: an indented line loads (live: `  key : value` is read).
#[test]
fn indented_config_lines_are_clean() {
    let src =
        "name                        : Flow\n  cookie          (generate)  : 6\n\t$api : /fapi/\n";
    clean("config", src, "config-format");
}

#[test]
fn well_formed_config_is_clean() {
    let src = "# comment\n// another\nname : App\n$api : /api/\n$port (number) : 8000\ndatabase : postgresql://user:pass@localhost/db\nempty :\n\n";
    clean("config", src, "config-format");
    clean("plugins/admin/config", "name : Admin\n", "config-format");
}

// #16 config-overlay

#[test]
fn config_overlays_are_flagged() {
    assert_eq!(
        lines("config-debug", "name : Dev\n", "config-overlay"),
        vec![1]
    );
    assert_eq!(
        lines("config-release", "name : Prod\n", "config-overlay"),
        vec![1]
    );
}

#[test]
fn plain_config_is_not_an_overlay() {
    clean("config", "name : App\n", "config-overlay");
    clean("docs/config-debug.md", "notes\n", "config-overlay");
}

// #17 auth-delegate

const AUTH_ROUTES: &str = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('+GET /admin/', index);\n};\nfunction index($) { $.plain('x'); }\n";

fn auth_findings(src: &str, has_auth: Option<bool>) -> Vec<usize> {
    let ctx = ProjectContext {
        has_auth,
        ..ProjectContext::default()
    };
    check_in_project("controllers/admin.js", src, &CheckConfig::default(), &ctx)
        .into_iter()
        .filter(|f| f.rule == "auth-delegate")
        .map(|f| f.line)
        .collect()
}

#[test]
fn session_routes_without_auth_in_project_are_flagged() {
    assert_eq!(auth_findings(AUTH_ROUTES, Some(false)), vec![3]);
    let action = "NEWACTION('Users|update', { route: '+API ?', action: $ => $.success() });\n";
    let ctx = ProjectContext {
        has_auth: Some(false),
        ..ProjectContext::default()
    };
    let f = check_in_project("actions/users.js", action, &CheckConfig::default(), &ctx);
    assert!(f.iter().any(|f| f.rule == "auth-delegate"));
}

#[test]
fn session_routes_with_auth_or_unknown_context_are_clean() {
    assert!(auth_findings(AUTH_ROUTES, Some(true)).is_empty());
    assert!(auth_findings(AUTH_ROUTES, None).is_empty());
    let plain = "exports.install = function() {\n\tROUTE('GET /', index);\n};\nfunction index($) { $.plain('x'); }\n";
    assert!(auth_findings(plain, Some(false)).is_empty());
}

#[test]
fn project_scan_finds_auth_in_definitions() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(ProjectContext::scan(dir.path()).has_auth, Some(false));
    std::fs::create_dir(dir.path().join("definitions")).unwrap();
    std::fs::write(dir.path().join("definitions/auth.js"), "// AUTH(fn)\n").unwrap();
    assert_eq!(ProjectContext::scan(dir.path()).has_auth, Some(false));
    std::fs::write(
        dir.path().join("definitions/auth.js"),
        "AUTH(function($) {\n\t$.invalid();\n});\n",
    )
    .unwrap();
    assert_eq!(ProjectContext::scan(dir.path()).has_auth, Some(true));
}

// #18 indent-tabs

#[test]
fn space_indentation_is_flagged_once_per_file() {
    let src = "exports.install = function() {\n    ROUTE('GET /', index);\n};\n\nfunction index($) {\n    $.plain('x');\n}\n";
    let f = findings("controllers/default.js", src, "indent-tabs");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].line, 2);
    assert!(f[0].message.starts_with("2 line(s)"));
}

#[test]
fn tab_indentation_and_comment_or_string_continuations_are_clean() {
    let src = "/**\n * Doc comment.\n */\nif (a &&\n\t  b)\n\tx();\nexports.install = function() {\n\tROUTE('GET /', index);\n};\n\nvar s = `multi\n    line`;\n\nfunction index($) {\n\t$.plain('x');\n}\n";
    clean("controllers/default.js", src, "indent-tabs");
}

// #19 realtime-package

#[test]
fn cron_and_socket_packages_are_flagged() {
    let src = "var cron = require('node-cron');\nvar io = require('socket.io');\nconst WebSocket = require('ws');\n";
    assert_eq!(
        lines("definitions/jobs.js", src, "realtime-package"),
        vec![1, 2, 3]
    );
}

#[test]
fn framework_cron_and_sockets_are_clean() {
    let src = "CRON('0 * * * *', fn);\nROUTE('SOCKET /ws/', socket);\nvar x = require('wsse');\n";
    clean("definitions/jobs.js", src, "realtime-package");
}

// #20 process-env (off by default)

#[test]
fn process_env_in_feature_code_is_noted_when_enabled() {
    let src = "var key = process.env.API_KEY;\n";
    assert_eq!(lines("definitions/init.js", src, "process-env"), vec![1]);
    let off = check("definitions/init.js", src, &CheckConfig::default());
    assert!(off.iter().all(|f| f.rule != "process-env"));
}

#[test]
fn process_env_in_index_and_conf_reads_are_clean() {
    clean(
        "index.js",
        "require('total5');\nTotal.run({ port: process.env.PORT });\n",
        "process-env",
    );
    clean(
        "definitions/init.js",
        "var key = CONF.api_key;\n",
        "process-env",
    );
}

// #21 package-total5

#[test]
fn package_json_on_total4_or_without_total5_is_flagged() {
    let src =
        "{\n\t\"name\": \"app\",\n\t\"dependencies\": {\n\t\t\"total4\": \"^0.0.90\"\n\t}\n}\n";
    let f = findings("package.json", src, "package-total5");
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].line, 3);
    assert_eq!(f[1].line, 4);
}

#[test]
fn malformed_package_json_is_reported_not_panicking() {
    let f = findings(
        "package.json",
        "{\n\t\"name\": \"app\",\n}\n",
        "package-total5",
    );
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("not valid JSON"));
}

#[test]
fn package_json_with_total5_is_clean() {
    clean(
        "package.json",
        "{ \"devDependencies\": { \"total5\": \"latest\" } }",
        "package-total5",
    );
    clean("plugins/x/package.json", "not json", "package-total5");
}

// #32 item 3: mistakes that break the app at boot or silently (each verified live on total5 0.0.14)

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// The findings of `rule` in `path` of a project made of `files`, as `totem check` sees it.
fn in_project(files: &[(&str, &str)], path: &str, rule: &str) -> Vec<usize> {
    let dir = project(files);
    let text = files.iter().find(|(p, _)| *p == path).unwrap().1;
    check_in_project(
        path,
        text,
        &CheckConfig::default(),
        &ProjectContext::scan(dir.path()),
    )
    .into_iter()
    .filter(|f| f.rule == rule)
    .map(|f| f.line)
    .collect()
}

const USES_ITEM: &str = "NEWACTION('Items|create', {\n\tinput: '*name:String',\n\troute: 'API ?',\n\taction: $ => $.success()\n});\nNEWACTION('Items|update', {\n\tinput: '@Item',\n\troute: 'API ?',\n\taction: $ => $.success()\n});\n";
const DEFINES_ITEM: &str = "NEWSCHEMA('@Item', 'name:String, price:Number');\n";

#[test]
fn a_schema_that_loads_after_its_action_is_an_error() {
    // schemas/ loads after actions/; actions/schemas.js after actions/items.js; definitions/ too.
    for at in [
        "schemas/item.js",
        "actions/schemas.js",
        "definitions/item.js",
    ] {
        let files = [("actions/items.js", USES_ITEM), (at, DEFINES_ITEM)];
        assert_eq!(
            in_project(&files, "actions/items.js", "schema-load-order"),
            vec![7],
            "{at}"
        );
    }
    // Below the action in the same file.
    let below = format!("{USES_ITEM}{DEFINES_ITEM}");
    assert_eq!(
        in_project(
            &[("actions/items.js", &below)],
            "actions/items.js",
            "schema-load-order"
        ),
        vec![7]
    );
    let f = check_in_project(
        "actions/items.js",
        &below,
        &CheckConfig::default(),
        &ProjectContext::default(),
    );
    assert!(f.iter().any(|f| f.rule == "schema-load-order"
        && f.severity == Severity::Error
        && f.message.contains("modules/")));
}

#[test]
fn a_schema_that_loads_first_is_clean() {
    for at in [
        "modules/schemas.js",
        "actions/a-schemas.js",
        "extensions/item.js",
    ] {
        let files = [("actions/items.js", USES_ITEM), (at, DEFINES_ITEM)];
        assert!(
            in_project(&files, "actions/items.js", "schema-load-order").is_empty(),
            "{at}"
        );
    }
    let above = format!("{DEFINES_ITEM}{USES_ITEM}");
    clean("actions/items.js", &above, "schema-load-order");
    let json = [
        ("actions/items.js", USES_ITEM),
        ("jsonschemas/Item.json", "{\"type\":\"object\"}"),
    ];
    assert!(in_project(&json, "actions/items.js", "schema-load-order").is_empty());
    // A schema defined nowhere the check can see is left alone (it may be made at run time).
    assert!(
        in_project(
            &[("actions/items.js", USES_ITEM)],
            "actions/items.js",
            "schema-load-order"
        )
        .is_empty()
    );
}

const VIEW_CONTROLLER: &str = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";

#[test]
fn a_view_without_a_layout_is_an_error() {
    let files = [
        ("controllers/default.js", VIEW_CONTROLLER),
        ("views/index.html", "<h1>Shop</h1>\n"),
    ];
    assert_eq!(
        in_project(&files, "controllers/default.js", "view-layout"),
        vec![6]
    );
}

#[test]
fn a_view_with_a_layout_or_its_own_is_clean() {
    let with_layout = [
        ("controllers/default.js", VIEW_CONTROLLER),
        ("views/index.html", "<h1>Shop</h1>\n"),
        ("views/layout.html", "<body>@{body}</body>\n"),
    ];
    assert!(in_project(&with_layout, "controllers/default.js", "view-layout").is_empty());
    let own = [
        ("controllers/default.js", VIEW_CONTROLLER),
        ("views/index.html", "@{layout('')}\n<h1>Shop</h1>\n"),
    ];
    assert!(in_project(&own, "controllers/default.js", "view-layout").is_empty());
    // Without the project's views (an edit checked alone), nothing is said.
    clean("controllers/default.js", VIEW_CONTROLLER, "view-layout");
}

#[test]
fn a_plugin_without_index_is_an_error() {
    let ctrl = "exports.install = function() {\n\tROUTE('GET /admin/', admin);\n};\nfunction admin($) { $.plain('a'); }\n";
    let files = [("plugins/admin/controllers/admin.js", ctrl)];
    assert_eq!(
        in_project(&files, "plugins/admin/controllers/admin.js", "plugin-index"),
        vec![1]
    );
    let with_index = [
        ("plugins/admin/controllers/admin.js", ctrl),
        ("plugins/admin/index.js", "exports.name = 'Admin';\n"),
    ];
    assert!(
        in_project(
            &with_index,
            "plugins/admin/controllers/admin.js",
            "plugin-index"
        )
        .is_empty()
    );
}

#[test]
fn two_schema_actions_on_api_question_mark_collide() {
    let src = "NEWSCHEMA('Items', function(schema) {\n\tschema.action('list', {\n\t\troute: 'API ?',\n\t\taction: $ => $.success([])\n\t});\n\tschema.action('read', {\n\t\troute: 'API ?',\n\t\taction: $ => $.success({})\n\t});\n});\n";
    assert_eq!(
        lines("schemas/items.js", src, "api-route-duplicate"),
        vec![7]
    );
    // One per schema, or each with its own endpoint, is fine.
    let one = "NEWSCHEMA('Items', function(schema) {\n\tschema.action('list', { route: 'API ?', action: $ => $.success([]) });\n});\nNEWSCHEMA('Orders', function(schema) {\n\tschema.action('list', { route: 'API ?', action: $ => $.success([]) });\n});\n";
    clean("schemas/items.js", one, "api-route-duplicate");
    let own = "NEWSCHEMA('Items', function(schema) {\n\tschema.action('list', { route: 'API /api/ -items_list --> Items/list', action: $ => $.success([]) });\n\tschema.action('read', { route: 'API /api/ -items_read --> Items/read', action: $ => $.success({}) });\n});\n";
    clean("schemas/items.js", own, "api-route-duplicate");
}

#[test]
fn a_route_flag_naming_no_middleware_is_an_error() {
    let ctrl = "exports.install = function() {\n\tROUTE('GET /admin/ #auth', admin);\n\tROUTE('GET /panel/ #admin', admin);\n};\nfunction admin($) { $.plain('a'); }\n";
    let files = [
        ("controllers/admin.js", ctrl),
        (
            "definitions/middleware.js",
            "MIDDLEWARE('auth', function($, next) {\n\tnext();\n});\n",
        ),
    ];
    assert_eq!(
        in_project(&files, "controllers/admin.js", "route-middleware"),
        vec![3]
    );
    // A middleware with a computed name, or no project context: nothing is said.
    let dynamic = [
        ("controllers/admin.js", ctrl),
        (
            "definitions/middleware.js",
            "for (var name of ['auth', 'admin'])\n\tMIDDLEWARE(name, ($, next) => next());\n",
        ),
    ];
    assert!(in_project(&dynamic, "controllers/admin.js", "route-middleware").is_empty());
    clean("controllers/admin.js", ctrl, "route-middleware");
    // Status-code routes start with '#'.
    let status = [(
        "controllers/e.js",
        "exports.install = function() {\n\tROUTE('#404', notfound);\n};\nfunction notfound($) { $.plain('x'); }\n",
    )];
    assert!(in_project(&status, "controllers/e.js", "route-middleware").is_empty());
}

#[test]
fn install_with_a_framework_argument_is_an_error() {
    let src = "exports.install = function(framework) {\n\tframework.route('GET /', index);\n};\nfunction index($) {\n\t$.plain('hi');\n}\n";
    assert_eq!(
        lines("controllers/default.js", src, "install-argument"),
        vec![2]
    );
    let guarded = "exports.install = function(options) {\n\tif (options)\n\t\toptions.start();\n\tROUTE('GET /', index);\n};\nfunction index($) { $.plain('hi'); }\n";
    clean("plugins/a/index.js", guarded, "install-argument");
    clean(
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', index);\n};\nfunction index($) { $.plain('hi'); }\n",
        "install-argument",
    );
}

// #32 item 4: no false findings on libraries and guards

#[test]
fn a_library_gets_no_app_boot_or_dependency_errors() {
    let lib = "exports.init = function(name) {\n\tNEWDB(name, require('./db'));\n};\n";
    let pkg = "{\n\t\"name\": \"dbx\",\n\t\"main\": \"index.js\",\n\t\"peerDependencies\": {\n\t\t\"total5\": \"*\"\n\t}\n}\n";
    let files = [("index.js", lib), ("package.json", pkg)];
    assert!(in_project(&files, "index.js", "boot-total5").is_empty());
    assert!(in_project(&files, "package.json", "package-total5").is_empty());
    // The same files in an app (total5 a dependency, an index.js that boots) are still checked.
    let app_pkg = "{\n\t\"dependencies\": {\n\t\t\"total5\": \"*\"\n\t}\n}\n";
    let app = [
        ("index.js", "require('total5');\nTotal.run({});\n"),
        ("package.json", app_pkg),
        ("definitions/x.js", "var a = 1;\n"),
    ];
    let dir = project(&app);
    let ctx = ProjectContext::scan(dir.path());
    assert!(!ctx.not_app);
    let f = check_in_project("index.js", lib, &CheckConfig::default(), &ctx);
    assert!(f.iter().any(|f| f.rule == "boot-total5"), "{f:?}");
}

#[test]
fn a_guarded_clean_call_is_not_v4_api() {
    let src = "NEWACTION('Items|save', {\n\taction: function($, model) {\n\t\tvar data = typeof(model.$clean) === 'function' ? model.$clean() : model;\n\t\t$.success(data);\n\t}\n});\n";
    clean("actions/items.js", src, "schema-v4-api");
    let amp = "function f(model) {\n\treturn model.$clean && model.$clean();\n}\n";
    clean("modules/util.js", amp, "schema-v4-api");
    let bare = "NEWACTION('Items|save', {\n\taction: function($, model) {\n\t\t$.success(model.$clean());\n\t}\n});\n";
    assert_eq!(lines("actions/items.js", bare, "schema-v4-api"), vec![3]);
}

// Issue 39: a fix in a finding is the project's own code rewritten, or words. A small model
// copies example code from a tool result into the file, so no finding shows an invented route,
// handler, schema or job.

fn all_findings(path: &str, src: &str) -> Vec<Finding> {
    let cfg = CheckConfig {
        enabled: totem_totaljs::rules().map(|r| r.id.to_string()).collect(),
        ..Default::default()
    };
    check(path, src, &cfg)
}

#[test]
fn fixes_show_the_projects_own_code_or_words_never_an_invented_example() {
    let files: &[(&str, &str)] = &[
        (
            "controllers/api.js",
            "var express = require('express');\nvar app = express();\napp.get('/items/', listItems);\napp.use(function(req, res) { res.json({}); res.render('x'); });\nfunction listItems(req, res) { res.send('x'); }\n",
        ),
        (
            "controllers/plain.js",
            "ROUTE('GET /orders/', orders);\nfunction orders($) { $.json([]); }\n",
        ),
        (
            "controllers/top.js",
            "exports.install = function() {};\nROUTE('GET /late/', late);\nfunction late() { this.json({}); var self = this; self.plain('x'); }\n",
        ),
        (
            "controllers/arg.js",
            "exports.install = function(app) {\n\tapp.route('/a/', a);\n};\n",
        ),
        (
            "controllers/flags.js",
            "exports.install = function() {\n\tROUTE('POST /up/', up, ['upload'], 1024);\n\tROUTE('+GET /me/', me);\n\tROUTE('GET /v4/ *Orders --> list');\n\tROUTE('GET /mw/ #guard', me);\n};\n",
        ),
        (
            "definitions/jobs.js",
            "var cron = require('node-cron');\nvar io = require('socket.io');\nvar h = require('./helpers');\nsetInterval(function() {}, 1000);\nSCHEDULE('1 * * * *', run);\nvar t = TABLE('x');\nWEBSOCKET('/ws/', x);\nNEWOPERATION('a', b);\nGETSCHEMA('A');\nNEWTASK('a', b);\n",
        ),
        (
            "schemas/orders.js",
            "NEWSCHEMA('Orders', function(schema) {\n\tschema.setSave(function($) { $.view('x'); $.success(); });\n}).make();\n",
        ),
        ("config", "default_port : 8000\ntitle:Shop\n{\"a\": 1}\n"),
    ];
    let mut messages = Vec::new();
    for (path, src) in files {
        messages.extend(all_findings(path, src).into_iter().map(|f| f.message));
    }
    assert!(
        messages.len() >= 15,
        "too few findings to judge: {messages:#?}"
    );
    for bad in [
        "/url/",
        "/x/",
        "handler)",
        "'Name'",
        "Ns|name",
        "{ ... }",
        ", fn)",
        "*/5",
        "(obj)",
        "(value)",
        "'name : App'",
        "/upload/",
        "/ws/'",
    ] {
        let hit: Vec<&String> = messages.iter().filter(|m| m.contains(bad)).collect();
        assert!(hit.is_empty(), "an invented example ({bad}) in: {hit:#?}");
    }
    let has = |s: &str| messages.iter().any(|m| m.contains(s));
    // The project's own routes, rewritten.
    assert!(has("ROUTE('GET /items/', listItems)"), "{messages:#?}");
    assert!(
        has("exports.install = function() { ROUTE('GET /orders/', orders); }"),
        "{messages:#?}"
    );
    assert!(
        has("ROUTE('GET /late/', late) at the top level"),
        "{messages:#?}"
    );
    assert!(
        has("give late() a parameter $ and call $.json()"),
        "{messages:#?}"
    );
    assert!(has("remove the parameter app"), "{messages:#?}");
    assert!(has("'--> Orders|list'"), "{messages:#?}");
}
