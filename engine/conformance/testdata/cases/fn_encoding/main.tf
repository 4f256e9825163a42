locals {
  doc = { name = "svc", ports = [80, 443], meta = { "a/b" = true, n = null } }
}

output "encoding_functions" {
  value = {
    base64decode = base64decode("c3RhY2tk")
    base64encode = base64encode("stackd")
    base64gzip   = base64gzip("stackd")
    csvdecode    = csvdecode("a,b\n1,2\n3,4\n")
    jsondecode   = jsondecode("{\"x\":[1,\"two\",null,{\"y\":false}]}")
    jsonencode   = jsonencode(local.doc)
    textdecode   = textdecodebase64("aABpAA==", "UTF-16LE")
    textencode   = textencodebase64("hi", "UTF-16LE")
    urlencode    = urlencode("a b&c=d/é")
    yamldecode   = yamldecode("a: 1\nb: [x, y]\nc: {d: true}\n")
    yamlencode   = yamlencode(local.doc)
  }
}
