require('total5');
Total.run({ watcher: false });
