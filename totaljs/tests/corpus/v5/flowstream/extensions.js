// Loaded into each flow: HTML extensions from a folder, and an action that lists them.
exports.install = function(instance) {

	REPO.extensions = [];

	Total.Fs.readdir(Total.path.root('extensions'), async function(err, files) {
		if (err)
			return;
		for (let file of files) {
			if (file.endsWith('.html'))
				REPO.extensions.push({ id: file.replace(/\.html$/, ''), html: await Total.readfile(PATH.join(Total.path.root('extensions'), file), 'utf8'), flow: instance.id });
		}
	});

	NEWACTION('Extensions', {
		action: $ => $.callback(REPO.extensions)
	});
};
