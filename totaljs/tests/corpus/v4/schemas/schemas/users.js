NEWSCHEMA('Users', function(schema) {
	schema.define('name', String, true); // expect: schema-v4-api
	schema.define('email', 'Email'); // expect: schema-v4-api

	schema.setQuery(function($) { // expect: schema-v4-api
		TABLE('users').find().callback($.callback); // expect: v4-global
	});

	schema.setSave(function($, model) { // expect: schema-v4-api
		var clean = $.model.$clean(); // expect: schema-v4-api
		NOSQL('users').insert(clean).callback($.done());
	});

	schema.addWorkflow('notify', function($) { // expect: schema-v4-api
		$.success();
	});
});

var Orders = GETSCHEMA('Orders'); // expect: v4-global
