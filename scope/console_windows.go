package scope

// Console process groups, which only console control events (Ctrl+C, Ctrl+Break) use. API facts
// relied on:
//
//	CREATE_NEW_PROCESS_GROUP   the child leads a new console process group and starts with Ctrl+C
//	                           ignored (RTL_USER_PROCESS_PARAMETERS.ConsoleFlags bit 0, inherited
//	                           by its descendants); Ctrl+Break still reaches it
//	Ctrl+C, Ctrl+Break typed   delivered to every process attached to the console, whatever its
//	                           group; a process that ignores Ctrl+C never sees it
//	no CREATE_NEW_PROCESS_GROUP   the child joins its creator's group with its creator's Ctrl+C
//	                           setting
//
// Job membership does not depend on any of it: a child that shares its owner's console group is
// still in its own job, and dies with it.
