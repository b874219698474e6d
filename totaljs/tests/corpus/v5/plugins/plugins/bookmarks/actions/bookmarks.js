NEWACTION('Bookmarks/list', {
	name: 'List bookmarks',
	permissions: 'bookmarks',
	action: function($) {
		NOSQL('bookmarks').find().where('userid', $.user.id).take(CONF.bookmarks_limit).callback($);
	}
});

NEWACTION('Bookmarks/save', {
	name: 'Save a bookmark',
	permissions: 'bookmarks',
	input: '*name:String, *url:String',
	action: function($, model) {
		model.id = UID();
		model.userid = $.user.id;
		model.dtcreated = NOW;
		NOSQL('bookmarks').insert(model).callback($.done(model.id));
	}
});
