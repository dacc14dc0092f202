"""(placeholder: methods of this family are registered here)"""
