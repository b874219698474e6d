exports.icon = 'ti ti-bookmark';
exports.name = '@(Bookmarks)';
exports.position = 10;
exports.permissions = [{ id: 'bookmarks', name: 'Bookmarks' }];
exports.visible = user => user.sa || user.permissions.includes('bookmarks');

exports.install = function() {
	ROUTE('+API ? -bookmarks_list --> Bookmarks/list');
	ROUTE('+API ? +bookmarks_save --> Bookmarks/save');
};
