var express = require('express'); // expect: no-express
var cors = require('cors'); // expect: no-express
var cron = require('node-cron'); // expect: realtime-package
var fs = require('fs'); // expect: node-builtin
var helper = require('../modules/helper'); // expect: no-app-require
var app = express();

app.use(cors()); // expect: no-express
app.get('/items', function(req, res) { // expect: no-express
	res.json([]); // expect: no-express
});
app.listen(3000); // expect: no-express
