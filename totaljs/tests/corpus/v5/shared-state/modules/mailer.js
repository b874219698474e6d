exports.id = 'mailer';

exports.send = function(email, message) {
	MAIL(email, 'Notice', '@(Notice)', { message: message });
};

exports.install = function() {
	console.log('mailer ready');
};
