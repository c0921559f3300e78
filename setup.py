"""Map the design card's top-level folders into the one `spindle` import namespace.

pyproject.toml cannot express "folder core/ and everything below it is spindle.core",
so the package list is computed here; all other metadata lives in pyproject.toml.
"""
from setuptools import find_packages, setup

FOLDERS = {"core": "spindle.core", "lua": "spindle.lua", "shell": "spindle.shell",
           "spark_ext": "spindle.spark_ext"}

packages, package_dir = [], {}
for folder, name in FOLDERS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir,
      package_data={"spindle.lua": ["*.lua", "modules/*.lua", "box/*.lua"], "spindle.core.box": ["bootstrap.mp"]},
      include_package_data=True)
