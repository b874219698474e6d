MAIN.cache = MEMORIZE('cache');
MAIN.counter = 0;

FUNC.notify = function(user, message) {
	MAIN.counter++;
	MODS.mailer && MODS.mailer.send(user.email, message);
};

CRON('*/10 * * * *', function() {
	MAIN.cache.save();
});

ON('service', function(counter) {
	if (counter % 60 === 0)
		FUNC.cleanup();
});

FUNC.cleanup = function() {
	NOSQL('logs').remove().where('dtcreated', '<', NOW.add('-7 days'));
};
