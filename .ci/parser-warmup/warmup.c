/*
 * Fills the T-SQL parser's prediction cache in the Babelfish postmaster, so
 * that every session forked from it starts warm (see .ci/start-babelfish).
 *
 * Babelfish parses T-SQL with the ANTLR C++ runtime, whose prediction cache
 * (the DFA) lives in each process and starts empty: a new session pays about
 * a second and a half of CPU for its first procedure and half a second for
 * each other, and a test run opens well over a thousand sessions. The cache
 * only memoises the parser's decisions, so what any text parses to is the
 * same with it warm or cold.
 *
 * Loaded through shared_preload_libraries, it parses every file of the folder
 * named by FENCEPOST_PARSER_WARMUP once, with babelfishpg_tsql's own parser.
 * The library is opened directly: its _PG_init needs a backend, and a backend
 * runs it as usual when it loads the library. A file that does not parse is
 * logged and skipped.
 */
#include "postgres.h"

#include <dirent.h>
#include <dlfcn.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static void
parse_file(PGFunction parse, const char *folder, const char *name)
{
	char		path[MAXPGPATH];
	FILE	   *file;
	long		length;
	char	   *source;

	snprintf(path, sizeof(path), "%s/%s", folder, name);
	file = fopen(path, "r");
	if (file == NULL)
		return;
	fseek(file, 0, SEEK_END);
	length = ftell(file);
	fseek(file, 0, SEEK_SET);
	source = palloc(length + 1);
	length = fread(source, 1, length, file);
	source[length] = '\0';
	fclose(file);
	PG_TRY();
	{
		Datum		answer = DirectFunctionCall1(parse, CStringGetTextDatum(source));

		elog(LOG, "parser warm-up: %s: %s", name, text_to_cstring(DatumGetTextPP(answer)));
	}
	PG_CATCH();
	{
		FlushErrorState();
		elog(LOG, "parser warm-up: %s raised an error", name);
	}
	PG_END_TRY();
	pfree(source);
}

void
_PG_init(void)
{
	const char *folder = getenv("FENCEPOST_PARSER_WARMUP");
	char		library[MAXPGPATH];
	void	   *handle;
	PGFunction	parse;
	DIR		   *dir;
	struct dirent *entry;

	if (!process_shared_preload_libraries_in_progress || folder == NULL)
		return;
	snprintf(library, sizeof(library), "%s/babelfishpg_tsql.so", pkglib_path);
	handle = dlopen(library, RTLD_LAZY | RTLD_GLOBAL);
	if (handle == NULL)
	{
		elog(LOG, "parser warm-up: %s", dlerror());
		return;
	}
	parse = (PGFunction) dlsym(handle, "antlr_parser");
	dir = opendir(folder);
	if (parse == NULL || dir == NULL)
	{
		elog(LOG, "parser warm-up: no parser or no folder %s", folder);
		return;
	}
	while ((entry = readdir(dir)) != NULL)
		if (entry->d_name[0] != '.')
			parse_file(parse, folder, entry->d_name);
	closedir(dir);
}
