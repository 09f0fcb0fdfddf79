"""The foundation every stage stands on: one error hierarchy (`errors`), settings, progress bars and step lines
(`progress`, `stages`), files and folders written whole (`atomic`, `atomic_folder`), the readers of the text files
and tables users give (`textfiles`, `tables`) and the entry of every import-format registry (`import_formats`),
numeric arrays without pickles (`arrays`), text checked before it is stored (`storable`), image decoding and checks
(`imaging`, `imagecheck`), class vocabularies (`vocabulary`) and the workspace look-ups (`workspace`). It imports
nothing of the stages above it.
"""
