b = "from b.auto.tfvars"
