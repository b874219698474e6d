require('total5');

Total.run({ watcher: false, ip: '127.0.0.1' });
