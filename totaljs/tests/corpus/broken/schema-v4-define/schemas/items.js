NEWSCHEMA('Items', function(schema) {
	schema.define('name', String, true); // expect: schema-v4-api
});
