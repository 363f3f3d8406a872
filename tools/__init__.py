"""Repository tools (fleet generator, system set-up, output identity): not part of the installed package."""
