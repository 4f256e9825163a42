output "filesystem_functions" {
  value = {
    abspath_rel    = basename(abspath("files/a.txt"))
    basename       = basename("dir/sub/file.txt")
    dirname        = dirname("dir/sub/file.txt")
    file           = file("${path.module}/files/a.txt")
    filebase64     = filebase64("${path.module}/files/a.txt")
    fileexists     = fileexists("${path.module}/files/a.txt")
    fileexists_not = fileexists("${path.module}/files/none.txt")
    fileset        = fileset(path.module, "files/*.txt")
    filemd5        = filemd5("${path.module}/files/a.txt")
    filesha1       = filesha1("${path.module}/files/a.txt")
    filesha256     = filesha256("${path.module}/files/a.txt")
    filesha512     = filesha512("${path.module}/files/a.txt")
    filebase64sha256 = filebase64sha256("${path.module}/files/a.txt")
    pathexpand_rel = pathexpand("relative/path")
    templatefile   = templatefile("${path.module}/files/greeting.tftpl", { names = ["ann", "bob"], title = "Team" })
  }
}
