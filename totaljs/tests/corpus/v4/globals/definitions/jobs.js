SCHEDULE('12:00', '1 day', function() { // expect: v4-global
	NEWTASK('Cleanup', function(push) { // expect: v4-global
		push('run', function($) {
			$.done();
		});
	});
	TASK('Cleanup/run', function() {}); // expect: v4-global
});

var model = CONVERT({ age: '12' }, 'age:Number'); // expect: v4-global
LOGGER('audit', 'started'); // expect: v4-global
MODULE('mailer').send(model); // expect: v4-global
var text = RESOURCE('default', 'welcome'); // expect: v4-global
PREF.set('started', NOW); // expect: v4-global
OPERATION('notify', {}, function() {}); // expect: v4-global
RUN('notify, audit', {}); // expect: v4-global
setInterval(function() {}, 60000); // expect: node-builtin
