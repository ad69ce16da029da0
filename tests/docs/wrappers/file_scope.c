/* A fragment of plain C at file scope (e.g. docs/codegen.md's reduced
 * compiler bug): it must compile as a translation unit. */
/* @DOC@ */
int main(void) { return 0; }
