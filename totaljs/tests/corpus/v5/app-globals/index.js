// Total.js v5 start script

require('total5');

const options = {};

// options.port = parseInt(process.argv[2]);
// options.watcher = true;

F.run(options);
