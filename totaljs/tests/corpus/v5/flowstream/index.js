require('total5');

const options = {};
options.release = process.argv.includes('--release');
Total.http(options);

// A Flow designer keeps its flows as files and serves one socket for the editor.
Flow.on('save', function(schema) {
	schema.dtupdated = new Date();
	Total.Fs.writeFile(PATH.flowstreams(schema.id + '.flow'), JSON.stringify(schema), ERROR('Flow.save'));
});

ON('flowstream', flow => Total.syslog('Flow "{id}" runs.'.args(flow)));

ROUTE('SOCKET / <8MB', function($) {
	$.autodestroy();
	Flow.socket(Object.keys(Flow.instances)[0], $);
});

ROUTE('GET /', $ => $.file(PATH.public('designer.html')));
