a = "from terraform.tfvars"
b = "from terraform.tfvars"
c = [1, 2]
