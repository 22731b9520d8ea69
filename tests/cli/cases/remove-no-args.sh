bloomkit remove
